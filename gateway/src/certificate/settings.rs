//! What the certificate manager is given: plain values, made by the configuration from the
//! command line.

use std::path::PathBuf;

/// The names pods know the apiserver by, which the serving certificate also names (as
/// YurtHub's).
pub const APISERVER_NAMES: [&str; 4] = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// YurtHub's `--bootstrap-mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BootstrapMode {
    /// A certificate requested with a bootstrap token (or bootstrap kubeconfig) and renewed.
    #[default]
    Token,
    /// kubelet's client certificate, as kubelet rotates it.
    Kubeletcertificate,
}

/// What the certificate manager is given.
#[derive(Clone, Debug, Default)]
pub struct CertificateSettings {
    /// token or kubeletcertificate.
    pub mode: BootstrapMode,
    /// `--root-dir`.
    pub root_dir: PathBuf,
    /// The node's name (the certificate's `system:node:<name>`).
    pub node_name: Option<String>,
    /// `--join-token`.
    pub join_token: Option<String>,
    /// `--bootstrap-file`.
    pub bootstrap_file: Option<PathBuf>,
    /// `--discovery-token-ca-cert-hash`.
    pub ca_pins: Vec<String>,
    /// `--discovery-token-unsafe-skip-ca-verification`.
    pub skip_ca_verification: bool,
    /// `--hub-cert-organizations`.
    pub organizations: Vec<String>,
    /// kubelet's client certificate and key (kubeletcertificate mode).
    pub kubelet_pair: PathBuf,
    /// The cluster CA kubelet trusts (kubeletcertificate mode).
    pub kubelet_ca: PathBuf,
    /// The HTTPS proxy's addresses and names besides the node's name, when its serving
    /// certificate is to be requested (no `--tls-cert-file` given).
    pub serving_names: Option<Vec<String>>,
}
