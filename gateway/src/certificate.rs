//! The certificate manager: the gateway's own client certificate and the HTTPS proxy's
//! serving certificate, as YurtHub's.
//!
//! - `--bootstrap-mode token`: the cluster CA from `--bootstrap-file` or by token discovery
//!   ([`discovery`]), a CertificateSigningRequest sent with the bootstrap token, the issued
//!   pair kept under `--root-dir` ([`store`]) and renewed before it expires ([`renewal`])
//!   on the gateway's own identity. The upstream transport presents the pair from its files
//!   and re-reads them when the symlink is re-pointed, so a renewal needs no restart.
//! - `--bootstrap-mode kubeletcertificate`: kubelet's own client certificate file, which
//!   kubelet rotates; the transport follows it the same way.
//! - In both modes, without `--tls-cert-file`: the HTTPS proxy's serving certificate
//!   (`kubernetes.io/kubelet-serving`, for the hub interface's address, loopback and the
//!   node's name), requested on the client identity and renewed the same way; the proxy
//!   serves with it as soon as an approver (OpenYurt's yurt-manager, an operator) lets it
//!   be issued.

pub mod discovery;
pub mod pins;
pub mod renewal;
pub mod request;
pub mod store;
mod token;

use std::path::PathBuf;

use thiserror::Error;

pub use pins::{CaPins, JoinToken};
pub use renewal::{Renewal, Subject, Validity};
pub use store::PairKind;
pub use store::Store;
pub use token::{BootstrapMode, CertificateSettings, Prepared, prepare};

/// Why a certificate could not be obtained or kept.
#[derive(Debug, Error)]
pub enum CertificateError {
    /// `--join-token` is not `<6 chars>.<16 chars>` of `[a-z0-9]`.
    #[error("--join-token is not a bootstrap token (<id>.<secret>, [a-z0-9]{{6}}.[a-z0-9]{{16}})")]
    BadToken,
    /// A `--discovery-token-ca-cert-hash` is not `sha256:<hex>`.
    #[error("--discovery-token-ca-cert-hash {0:?} is not sha256:<64 hex digits>")]
    BadPin(String),
    /// Token discovery without a pin and without the flag that allows it.
    #[error(
        "token discovery needs --discovery-token-ca-cert-hash (or \
         --discovery-token-unsafe-skip-ca-verification to trust the CA unchecked)"
    )]
    NoPins,
    /// No public key of the cluster's CA is pinned.
    #[error(
        "the cluster CA's public key is not pinned by --discovery-token-ca-cert-hash; it has {0:?}"
    )]
    PinMismatch(Vec<String>),
    /// cluster-info's signature does not check out.
    #[error("the signature of kube-public/cluster-info by the join token is wrong: {0}")]
    BadSignature(String),
    /// cluster-info is not (yet) signed by the token.
    #[error(
        "kube-public/cluster-info is not signed for token id {0:?}: the token is unknown or \
         expired, or kube-controller-manager's bootstrapsigner has not signed it yet"
    )]
    Unsigned(String),
    /// cluster-info cannot be used.
    #[error("token discovery: {0}")]
    Discovery(String),
    /// Neither a bootstrap credential nor a certificate to start from.
    #[error(
        "no credentials: give --kubeconfig, or --join-token or --bootstrap-file \
         (--bootstrap-mode token), or --bootstrap-mode kubeletcertificate"
    )]
    NoCredentials,
    /// No apiserver to ask.
    #[error("the certificate manager needs --server-addr")]
    NoServer,
    /// A certificate cannot be parsed.
    #[error("bad certificate: {0}")]
    BadCertificate(String),
    /// A key could not be made or used.
    #[error("cannot make the key or sign the request")]
    Key(#[source] rcgen::Error),
    /// A call to the apiserver failed.
    #[error("apiserver call failed")]
    Api(#[source] kube::Error),
    /// A kubeconfig cannot be used.
    #[error("cannot use kubeconfig {path}")]
    Kubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The request was denied, failed, or not issued in time.
    #[error("certificate request {0} was not issued: {1}")]
    NotIssued(String, String),
    /// A file under --root-dir could not be read or written.
    #[error("{path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
}

impl CertificateError {
    /// Whether trying again may help (the cloud unreachable, a token not yet signed, a
    /// request not yet issued), as opposed to a configuration to fix.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            CertificateError::Unsigned(_)
                | CertificateError::Discovery(_)
                | CertificateError::Api(_)
                | CertificateError::NotIssued(..)
        )
    }
}

/// The DER certificates of a PEM text (other blocks, such as a key, are skipped).
pub fn parse_pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, CertificateError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertificateError::BadCertificate(e.to_string()))?;
    if certs.is_empty() {
        return Err(CertificateError::BadCertificate(
            "no certificate in the PEM text".to_owned(),
        ));
    }
    Ok(certs)
}

/// The validity and subject common name of the first certificate of a PEM text.
pub fn leaf_of(pem: &[u8]) -> Result<(Validity, String), CertificateError> {
    let certs = parse_pem_certificates(pem)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&certs[0])
        .map_err(|e| CertificateError::BadCertificate(e.to_string()))?;
    let time = |t: x509_parser::time::ASN1Time| {
        let seconds = t.timestamp();
        if seconds >= 0 {
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds.unsigned_abs())
        } else {
            std::time::UNIX_EPOCH
        }
    };
    let validity = cert.validity();
    let common_name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    Ok((
        Validity {
            not_before: time(validity.not_before),
            not_after: time(validity.not_after),
        },
        common_name,
    ))
}
