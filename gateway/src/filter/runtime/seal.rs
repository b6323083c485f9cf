//! Whether the compiled-code store may be trusted, and the key its files are sealed with.
//!
//! Mapped code runs natively in the gateway, around the sandbox: whoever can write a file
//! the gateway maps, or the functions a compile takes code from, runs code as the gateway.
//! So the store's directory must be the gateway user's and writable by no one else (the
//! gateway makes it `0700` when it creates it), and every file of code and of functions
//! carries an HMAC-SHA256 under a 32-byte random key kept in the directory
//! ([`KEY_FILE`], `0600`), checked before anything is mapped or read. Code that does not
//! verify (tampered, sealed under another key, its seal missing) is compiled again from the
//! `.wasm`, never mapped. A key that is not a `0600` file of the gateway's user of 32 bytes
//! is replaced (the code sealed with it is then compiled again).

use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// The key's file, in the store's directory.
pub(crate) const KEY_FILE: &str = "hmac-sha256.key";

/// The length of the key and of a seal.
pub(crate) const LENGTH: usize = 32;

/// Why a directory is not trusted with code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Untrusted {
    /// Another user owns it.
    #[error("owned by uid {owner}, not the gateway's uid {ours}")]
    Owner {
        /// Its owner.
        owner: u32,
        /// The gateway's effective uid.
        ours: u32,
    },
    /// Others than its owner may write in it.
    #[error("writable by group or others (mode {0:o})")]
    Writable(u32),
    /// It could not be created or examined.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The key the store's files are sealed with.
pub(crate) struct Seal {
    key: hmac::Key,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seal(..)")
    }
}

impl Seal {
    /// The key of the store in `dir`: `dir` is created (`0700`) if missing and refused if
    /// untrusted; the key is read, or made when missing or unfit.
    pub(crate) fn open(dir: &Path) -> Result<Seal, Untrusted> {
        Seal::open_as(dir, effective_uid())
    }

    /// [`Seal::open`] for a gateway running as `uid`.
    pub(crate) fn open_as(dir: &Path, uid: u32) -> Result<Seal, Untrusted> {
        if !dir.exists() {
            if let Some(parent) = dir.parent() {
                fs::create_dir_all(parent)?;
            }
            match DirBuilder::new().mode(0o700).create(dir) {
                Ok(()) => fs::set_permissions(dir, Permissions::from_mode(0o700))?,
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(error.into()),
            }
        }
        let meta = fs::metadata(dir)?;
        if meta.uid() != uid {
            return Err(Untrusted::Owner {
                owner: meta.uid(),
                ours: uid,
            });
        }
        if meta.mode() & 0o022 != 0 {
            return Err(Untrusted::Writable(meta.mode() & 0o7777));
        }
        let path = dir.join(KEY_FILE);
        let bytes = match read_key(&path, uid) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => make_key(dir)?,
            Err(reason) => {
                tracing::warn!(path = %path.display(), %reason, "compiled-code key unfit; making a new one (stored code is compiled again)");
                fs::remove_file(&path)?;
                make_key(dir)?
            }
        };
        Ok(Seal {
            key: hmac::Key::new(hmac::HMAC_SHA256, &bytes),
        })
    }

    /// The seal of the file named `name` holding `bytes`: the name is sealed too, so that
    /// one component's code cannot be passed off under another's name.
    pub(crate) fn seal(&self, name: &str, bytes: &[u8]) -> [u8; LENGTH] {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(name.as_bytes());
        context.update(&[0]);
        context.update(bytes);
        let mut seal = [0; LENGTH];
        seal.copy_from_slice(context.sign().as_ref());
        seal
    }

    /// Whether `seal` is that of the file named `name` holding `bytes` (in constant time).
    pub(crate) fn verify(&self, name: &str, bytes: &[u8], seal: &[u8]) -> bool {
        let mut message = Vec::with_capacity(name.len() + 1 + bytes.len());
        message.extend_from_slice(name.as_bytes());
        message.push(0);
        message.extend_from_slice(bytes);
        hmac::verify(&self.key, &message, seal).is_ok()
    }
}

/// The gateway's effective uid.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid()
    }
}

/// The key in `path`: `None` when there is none, an error saying why when it is unfit (not a
/// regular file, another user's, readable or writable by others, not 32 bytes).
fn read_key(path: &Path, uid: u32) -> Result<Option<[u8; LENGTH]>, String> {
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error.to_string()),
    };
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.uid() != uid {
        return Err(format!("owned by uid {}, not {uid}", meta.uid()));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!("mode {:o}, not 600", meta.mode() & 0o7777));
    }
    let mut key = [0; LENGTH];
    let mut rest = Vec::new();
    file.read_exact(&mut key)
        .and_then(|()| file.read_to_end(&mut rest))
        .map_err(|e| format!("not {LENGTH} bytes: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("longer than {LENGTH} bytes"));
    }
    Ok(Some(key))
}

/// Makes a new key in `dir` and returns it, or the one another process (the gateway and
/// its compiling child open the store at once) put there first.
fn make_key(dir: &Path) -> io::Result<[u8; LENGTH]> {
    let mut key = [0; LENGTH];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| io::Error::other("no random bytes for the compiled-code key"))?;
    let path = dir.join(KEY_FILE);
    let temporary = dir.join(format!(".{KEY_FILE}.{}.tmp", std::process::id()));
    let _ = fs::remove_file(&temporary);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut file: File| {
            file.write_all(&key)?;
            file.sync_all()
        })
        // A link, unlike a rename, does not replace a key another process made meanwhile.
        .and_then(|()| fs::hard_link(&temporary, &path));
    let _ = fs::remove_file(&temporary);
    match written {
        Ok(()) => Ok(key),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
            read_key(&path, effective_uid())
                .map_err(io::Error::other)?
                .ok_or_else(|| io::Error::other("the compiled-code key vanished"))
        }
        Err(error) => Err(error),
    }
}
