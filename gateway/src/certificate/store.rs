//! The certificate manager's files under `--root-dir`, in YurtHub's layout:
//!
//! ```text
//! <root-dir>/                   0700
//!   bootstrap-hub.conf          0600  the bootstrap kubeconfig (--join-token)
//!   yurthub.conf                0600  the gateway's kubeconfig: CA and current pair
//!   pki/                        0700
//!     ca.crt                          the cluster CA
//!     yurthub-<unix time>.pem   0600  client certificate chain, then key
//!     yurthub-current.pem             symlink to the client pair in use
//!     yurthub-server-<unix time>.pem  0600  the HTTPS proxy's serving pair
//!     yurthub-server-current.pem      symlink to the serving pair in use
//! ```
//!
//! A new pair is written to a file of its own and the symlink re-pointed by a rename, so
//! that a reader (the upstream transport's [`crate::upstream::CertFiles`]) sees the old pair
//! or the new one, never half of each.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::error::CertificateError;

/// Which of the gateway's two certificates a pair is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairKind {
    /// The client certificate the gateway presents to the apiservers.
    Client,
    /// The HTTPS proxy's serving certificate.
    Serving,
}

impl PairKind {
    /// The pair's file name prefix (YurtHub's hub name, and its server store's).
    fn prefix(self) -> &'static str {
        match self {
            PairKind::Client => "yurthub",
            PairKind::Serving => "yurthub-server",
        }
    }

    /// What the pair is, for logs.
    pub fn describe(self) -> &'static str {
        match self {
            PairKind::Client => "client certificate",
            PairKind::Serving => "serving certificate",
        }
    }

    /// Whether `name` is one of this kind's dated pair files (`<prefix>-<digits>….pem`):
    /// `yurthub-server-1.pem` is not a client pair.
    fn owns(self, name: &str) -> bool {
        name.strip_prefix(self.prefix())
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|rest| {
                rest.starts_with(|c: char| c.is_ascii_digit()) && rest.ends_with(".pem")
            })
    }
}

/// The files of one `--root-dir`.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// The store at `root` (made absolute: kubeconfigs name its files).
    pub fn new(root: &Path) -> Result<Store, CertificateError> {
        let root = std::path::absolute(root).map_err(|e| io_error(root, e))?;
        Ok(Store { root })
    }

    /// Creates the directories, `0700` (they hold keys and the token).
    pub fn create_dirs(&self) -> Result<(), CertificateError> {
        for dir in [&self.root, &self.pki_dir()] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| io_error(dir, e))?;
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                .map_err(|e| io_error(dir, e))?;
        }
        Ok(())
    }

    /// A file directly under the root.
    pub fn root_dir_file(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// `<root>/pki`.
    pub fn pki_dir(&self) -> PathBuf {
        self.root.join("pki")
    }

    /// The cluster CA.
    pub fn ca_file(&self) -> PathBuf {
        self.pki_dir().join("ca.crt")
    }

    /// The current pair of `kind` (a symlink).
    pub fn current_pair(&self, kind: PairKind) -> PathBuf {
        self.pki_dir()
            .join(format!("{}-current.pem", kind.prefix()))
    }

    /// The bootstrap kubeconfig written from `--join-token`.
    pub fn bootstrap_kubeconfig(&self) -> PathBuf {
        self.root.join("bootstrap-hub.conf")
    }

    /// The gateway's kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.root
            .join(format!("{}.conf", PairKind::Client.prefix()))
    }

    /// Writes a new pair of `kind` and points its current symlink at it; older pairs of the
    /// kind are removed.
    pub fn write_pair(
        &self,
        kind: PairKind,
        chain_pem: &[u8],
        key_pem: &str,
    ) -> Result<PathBuf, CertificateError> {
        let dir = self.pki_dir();
        let prefix = kind.prefix();
        let seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let (file, mut out) = (0..)
            .map(|n| match n {
                0 => dir.join(format!("{prefix}-{seconds}.pem")),
                n => dir.join(format!("{prefix}-{seconds}-{n}.pem")),
            })
            .find_map(|path| {
                fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)
                    .ok()
                    .map(|f| (path, f))
            })
            .ok_or_else(|| io_error(&dir, std::io::ErrorKind::AlreadyExists.into()))?;
        let mut pem = chain_pem.to_vec();
        if !pem.ends_with(b"\n") {
            pem.push(b'\n');
        }
        pem.extend_from_slice(key_pem.as_bytes());
        out.write_all(&pem)
            .and_then(|()| out.sync_all())
            .map_err(|e| io_error(&file, e))?;
        let staged = dir.join(format!(".{prefix}-current.pem.tmp"));
        let _ = fs::remove_file(&staged);
        // Relative: the directory is also read where it is mounted elsewhere (a static pod's
        // hostPath, seen from the host).
        let target = file.file_name().map_or_else(|| file.clone(), PathBuf::from);
        std::os::unix::fs::symlink(&target, &staged).map_err(|e| io_error(&staged, e))?;
        fs::rename(&staged, self.current_pair(kind)).map_err(|e| io_error(&staged, e))?;
        self.remove_old_pairs(kind, &file);
        Ok(file)
    }

    fn remove_old_pairs(&self, kind: PairKind, keep: &Path) {
        let Ok(entries) = fs::read_dir(self.pki_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.owns(&name) && path != keep {
                let _ = fs::remove_file(&path);
            }
        }
    }

    /// Writes `contents` to `path` (`0600`) by a rename, so that no reader sees half.
    pub fn write_file(&self, path: &Path, contents: &[u8]) -> Result<(), CertificateError> {
        let staged = path.with_extension("tmp");
        let _ = fs::remove_file(&staged);
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&staged)
            .map_err(|e| io_error(&staged, e))?;
        out.write_all(contents)
            .and_then(|()| out.sync_all())
            .map_err(|e| io_error(&staged, e))?;
        fs::rename(&staged, path).map_err(|e| io_error(path, e))
    }
}

/// A kubeconfig (as JSON, which is YAML) for `server` trusting `ca_file`, with `user`.
pub fn kubeconfig(server: &http::Uri, ca_pem: &[u8], user: serde_json::Value) -> Vec<u8> {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": {
            "server": server.to_string().trim_end_matches('/'),
            "certificate-authority-data": ca,
        }}],
        "users": [{"name": "default-auth", "user": user}],
        "contexts": [{"name": "default-context", "context": {
            "cluster": "default-cluster", "user": "default-auth", "namespace": "default",
        }}],
        "current-context": "default-context",
    });
    // A json! value always serializes.
    serde_json::to_vec_pretty(&config).unwrap_or_default()
}

pub(super) fn io_error(path: &Path, source: std::io::Error) -> CertificateError {
    CertificateError::Io {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn pairs_are_private_and_replaced_by_a_rename() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(&dir.path().join("root")).unwrap();
        store.create_dirs().unwrap();
        assert_eq!(mode(&store.pki_dir()), 0o700);
        assert_eq!(mode(dir.path().join("root").as_path()), 0o700);
        let client = store.current_pair(PairKind::Client);
        let first = store
            .write_pair(PairKind::Client, b"CHAIN-1", "KEY-1\n")
            .unwrap();
        assert_eq!(mode(&first), 0o600);
        assert_eq!(fs::read(&client).unwrap(), b"CHAIN-1\nKEY-1\n");
        let serving = store
            .write_pair(PairKind::Serving, b"SERVING-1\n", "KEY-S\n")
            .unwrap();
        let second = store
            .write_pair(PairKind::Client, b"CHAIN-2\n", "KEY-2\n")
            .unwrap();
        assert_ne!(first, second);
        assert_eq!(fs::read(&client).unwrap(), b"CHAIN-2\nKEY-2\n");
        assert_eq!(
            fs::read_link(&client).unwrap(),
            Path::new(second.file_name().unwrap()),
            "the link is relative"
        );
        assert!(!first.exists(), "the replaced pair is removed");
        assert!(serving.exists(), "a client renewal leaves the serving pair");
        assert_eq!(
            fs::read(store.current_pair(PairKind::Serving)).unwrap(),
            b"SERVING-1\nKEY-S\n"
        );
        store
            .write_pair(PairKind::Serving, b"SERVING-2\n", "KEY-S\n")
            .unwrap();
        assert!(!serving.exists() && second.exists());
        store.write_file(&store.kubeconfig(), b"{}").unwrap();
        assert_eq!(mode(&store.kubeconfig()), 0o600);
    }
}
