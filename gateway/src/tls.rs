//! The HTTPS proxy's serving identity: a certificate chain and its key, from PEM files
//! (for pods that reach the apiserver through the gateway, a certificate of the cluster's
//! CA for the gateway's address), re-read when the files change; and the CA its clients'
//! certificates are verified against.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use thiserror::Error;

use crate::upstream::{CertFiles, CertFilesError};

/// Why the serving identity cannot be used.
#[derive(Debug, Error)]
pub enum TlsError {
    /// The certificate or key files cannot be loaded.
    #[error(transparent)]
    Files(#[from] CertFilesError),
    /// The cluster CA cannot verify client certificates.
    #[error("the cluster CA cannot be used to verify client certificates: {0}")]
    ClientCa(String),
}

/// Whether a client must present a certificate of the cluster's CA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCerts {
    /// It may (pods come with tokens instead): the HTTPS proxy.
    Optional,
    /// It must (only node identities are served): the pool port.
    Required,
}

/// A TLS server configuration from `cert` (a PEM chain) and `key` (a PEM private key),
/// offering HTTP/2 and HTTP/1.1. New connections are served with the files as they are
/// then (looked at every [`crate::upstream::CERT_CHECK_EVERY`] at most), so a rotated
/// certificate needs no restart. `issued_later`: the files may not exist yet (the
/// certificate manager's request waits for an approver), and until they do, handshakes
/// fail; else they must load now. A client may (or, `Required`, must) present a certificate,
/// which must then be one of `client_ca` (the cluster's CA); without a CA, client
/// certificates are not asked for.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: &[CertificateDer<'static>],
    issued_later: bool,
    client_certs: ClientCerts,
) -> Result<Arc<ServerConfig>, TlsError> {
    let builder = ServerConfig::builder();
    let provider = builder.crypto_provider().clone();
    let files = if issued_later {
        CertFiles::load_when_there(cert, key, provider.clone())
    } else {
        CertFiles::load(cert, key, provider.clone())?
    };
    let builder = if client_ca.is_empty() {
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for ca in client_ca {
            roots
                .add(ca.clone())
                .map_err(|e| TlsError::ClientCa(e.to_string()))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let verifier = match client_certs {
            ClientCerts::Optional => verifier.allow_unauthenticated(),
            ClientCerts::Required => verifier,
        };
        let verifier = verifier
            .build()
            .map_err(|e| TlsError::ClientCa(e.to_string()))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut config = builder.with_cert_resolver(Arc::new(files));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
