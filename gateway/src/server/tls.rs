//! The HTTPS proxy's serving identity: a certificate chain and its key, from PEM files
//! (for pods that reach the apiserver through the gateway, a certificate of the cluster's
//! CA for the gateway's address).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;

/// Why the serving identity cannot be used.
#[derive(Debug, Error)]
pub enum TlsError {
    /// A PEM file could not be read.
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
    /// The key does not fit the certificate, or is of a kind rustls does not take.
    #[error("the certificate and key cannot serve TLS")]
    Config(#[source] rustls::Error),
}

/// A TLS server configuration from `cert` (a PEM chain) and `key` (a PEM private key),
/// offering HTTP/2 and HTTP/1.1.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let cert_error = |source| TlsError::Read {
        path: cert.to_owned(),
        source,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(cert_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(cert_error)?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(cert.to_owned()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Read {
        path: key.to_owned(),
        source,
    })?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(TlsError::Config)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
