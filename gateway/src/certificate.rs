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
mod error;
mod pem;
pub mod pins;
pub mod renewal;
pub mod request;
pub(crate) mod settings;
pub mod store;
mod token;

pub use error::CertificateError;
pub use renewal::Renewal;
pub use settings::BootstrapMode;
pub use store::PairKind;
pub use token::prepare;
