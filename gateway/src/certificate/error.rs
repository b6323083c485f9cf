//! Why a certificate could not be obtained or kept.

use std::path::PathBuf;

use thiserror::Error;

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
