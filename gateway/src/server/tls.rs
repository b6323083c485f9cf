//! The HTTPS proxy's serving identity: a certificate chain and its key, from PEM files
//! (for pods that reach the apiserver through the gateway, a certificate of the cluster's
//! CA for the gateway's address), re-read when the files change.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use thiserror::Error;

use crate::upstream::{CertFiles, CertFilesError};

/// Why the serving identity cannot be used.
#[derive(Debug, Error)]
pub enum TlsError {
    /// The certificate or key files cannot be loaded.
    #[error(transparent)]
    Files(#[from] CertFilesError),
}

/// A TLS server configuration from `cert` (a PEM chain) and `key` (a PEM private key),
/// offering HTTP/2 and HTTP/1.1. New connections are served with the files as they are
/// then (looked at every [`crate::upstream::CERT_CHECK_EVERY`] at most), so a rotated
/// certificate needs no restart.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let builder = ServerConfig::builder();
    let provider = builder.crypto_provider().clone();
    let files = CertFiles::load(cert, key, provider)?;
    let mut config = builder
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(files));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
