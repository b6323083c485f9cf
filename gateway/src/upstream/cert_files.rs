//! A certificate and key kept in PEM files that are replaced while the gateway runs
//! (kubelet re-points `kubelet-client-current.pem` at each rotation; cert-manager and
//! operators rewrite serving certificates), re-read when they change, with no restart.
//!
//! The files are checked on use, at most every [`CHECK_EVERY`], by a `stat` of each (device,
//! inode, length, modification time, following symlinks), and read again only when that
//! changed. A pair that does not load (half written, cert and key not matching) keeps the
//! previous pair, and is logged once per change of the files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use thiserror::Error;

/// How often the files are looked at, at most: a `stat` per file, off the steady path of
/// requests (pooled connections make no handshake).
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// Why a certificate and key could not be loaded.
#[derive(Debug, Error)]
pub enum CertFilesError {
    /// A PEM file could not be read or parsed.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{0} holds no certificate")]
    NoCertificate(PathBuf),
    /// The key is of a kind the TLS provider does not take, or does not match the
    /// certificate.
    #[error("the certificate and key do not make a pair")]
    Pair(#[source] rustls::Error),
}

/// What identifies a file's content cheaply: it changes when the file is rewritten or a
/// symlink on its path is re-pointed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Stamp(Option<(u64, u64, u64, SystemTime)>);

impl Stamp {
    /// The stamp of the file at `path` now (of nothing, when it cannot be looked at).
    pub(super) fn of(path: &Path) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp(std::fs::metadata(path).ok().map(|m| {
            (
                m.dev(),
                m.ino(),
                m.len(),
                m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            )
        }))
    }
}

/// A certificate chain and key from two PEM files (the same file twice is fine).
pub struct CertFiles {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    check_every: Duration,
    state: Mutex<State>,
    /// Bumped at every reload, so that pooled connections made with the old pair can be
    /// left for new ones.
    generation: AtomicU64,
}

struct State {
    checked: Instant,
    /// The files as last looked at (loaded or not).
    stamps: (Stamp, Stamp),
    /// The pair in use; none before the files first loaded ([`CertFiles::load_when_there`]).
    current: Option<Arc<CertifiedKey>>,
}

impl CertFiles {
    /// Loads the pair; it must load now (a broken pair at start is a configuration error).
    pub fn load(
        cert: &Path,
        key: &Path,
        provider: Arc<CryptoProvider>,
    ) -> Result<CertFiles, CertFilesError> {
        let stamps = (Stamp::of(cert), Stamp::of(key));
        let current = Some(Arc::new(load(cert, key, &provider)?));
        Ok(CertFiles::with(cert, key, provider, stamps, current))
    }

    /// The pair when the files are there and load: until then [`CertFiles::current`] has
    /// none (a serving certificate still waiting to be issued).
    pub fn load_when_there(cert: &Path, key: &Path, provider: Arc<CryptoProvider>) -> CertFiles {
        let stamps = (Stamp::of(cert), Stamp::of(key));
        let current = match load(cert, key, &provider) {
            Ok(pair) => Some(Arc::new(pair)),
            Err(error) => {
                tracing::info!(error = %crate::error::error_chain(&error), cert = %cert.display(), "no certificate yet; it is used once it is there");
                None
            }
        };
        CertFiles::with(cert, key, provider, stamps, current)
    }

    fn with(
        cert: &Path,
        key: &Path,
        provider: Arc<CryptoProvider>,
        stamps: (Stamp, Stamp),
        current: Option<Arc<CertifiedKey>>,
    ) -> CertFiles {
        CertFiles {
            cert: cert.to_owned(),
            key: key.to_owned(),
            provider,
            check_every: CHECK_EVERY,
            state: Mutex::new(State {
                checked: Instant::now(),
                stamps,
                current,
            }),
            generation: AtomicU64::new(0),
        }
    }

    /// The same, looked at on every use.
    #[cfg(test)]
    pub(crate) fn checked_every(mut self, every: Duration) -> CertFiles {
        self.check_every = every;
        self
    }

    /// The pair to present now, re-read first when the files changed; none while the files
    /// have never loaded.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.checked.elapsed() >= self.check_every {
            state.checked = Instant::now();
            let stamps = (Stamp::of(&self.cert), Stamp::of(&self.key));
            if stamps != state.stamps {
                state.stamps = stamps;
                match load(&self.cert, &self.key, &self.provider) {
                    Ok(pair) => {
                        tracing::info!(cert = %self.cert.display(), "certificate changed on disk; using the new one for new connections");
                        state.current = Some(Arc::new(pair));
                        self.generation.fetch_add(1, Ordering::AcqRel);
                    }
                    Err(error) => tracing::warn!(
                        error = %crate::error::error_chain(&error),
                        cert = %self.cert.display(),
                        key = %self.key.display(),
                        "the certificate files changed but do not load; keeping the previous pair"
                    ),
                }
            }
        }
        state.current.clone()
    }

    /// How many times the pair was reloaded; [`CertFiles::current`] first looks at the files.
    pub fn generation(&self) -> u64 {
        self.current();
        self.generation.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for CertFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertFiles")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl rustls::client::ResolvesClientCert for CertFiles {
    fn resolve(&self, _: &[&[u8]], _: &[rustls::SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        self.current()
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl rustls::server::ResolvesServerCert for CertFiles {
    fn resolve(&self, _: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// Reads and checks a pair.
fn load(
    cert: &Path,
    key: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, CertFilesError> {
    let cert_error = |source| CertFilesError::Read {
        path: cert.to_owned(),
        source,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(cert_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(cert_error)?;
    if chain.is_empty() {
        return Err(CertFilesError::NoCertificate(cert.to_owned()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| CertFilesError::Read {
        path: key.to_owned(),
        source,
    })?;
    CertifiedKey::from_der(chain, key, provider).map_err(CertFilesError::Pair)
}

#[cfg(test)]
mod tests;
