//! YurtHub's certificate manager flags (`--bootstrap-mode`, `--root-dir`, …), and where
//! kubelet's certificate is in kubeletcertificate mode (fixed paths in YurtHub).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// YurtHub's `--bootstrap-mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum BootstrapMode {
    /// A certificate requested with a bootstrap token (or bootstrap kubeconfig) and renewed.
    #[default]
    Token,
    /// kubelet's client certificate, as kubelet rotates it.
    Kubeletcertificate,
}

/// The certificate manager's flags.
#[derive(Debug, Args)]
pub struct CertificateArgs {
    /// Where the gateway's client certificate comes from without --kubeconfig: token (a
    /// certificate requested with --join-token or --bootstrap-file, kept under --root-dir
    /// and renewed) or kubeletcertificate (kubelet's own, followed as kubelet rotates it).
    #[arg(long, value_enum, default_value_t = BootstrapMode::Token, value_name = "MODE")]
    pub bootstrap_mode: BootstrapMode,

    /// A bootstrap kubeconfig (CA and bootstrap token) to request the client certificate with.
    #[arg(long, value_name = "FILE")]
    pub bootstrap_file: Option<PathBuf>,

    /// A bootstrap token (`<id>.<secret>`): the cluster CA is found in
    /// `kube-public/cluster-info` and the client certificate requested with it.
    #[arg(long, value_name = "TOKEN")]
    pub join_token: Option<String>,

    /// Public key pins of the cluster CA for token discovery (`sha256:<hex>` of its
    /// SubjectPublicKeyInfo, as `kubeadm token create --print-join-command` prints).
    #[arg(long, value_delimiter = ',', value_name = "sha256:HEX")]
    pub discovery_token_ca_cert_hash: Vec<String>,

    /// Trust the CA of cluster-info without a pin (its signature by the token is still checked).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set)]
    pub discovery_token_unsafe_skip_ca_verification: bool,

    /// Organizations of the client certificate besides `system:nodes`; with any, the
    /// request goes to the kubernetes.io/kube-apiserver-client signer (approved by OpenYurt's
    /// yurt-manager) instead of kubelet's.
    #[arg(long, value_delimiter = ',', value_name = "ORGS")]
    pub hub_cert_organizations: Vec<String>,

    /// Directory of the certificate manager's files (bootstrap-hub.conf, yurthub.conf,
    /// pki/ca.crt, pki/yurthub-current.pem).
    #[arg(long, default_value = "/var/lib/yurthub", value_name = "DIR")]
    pub root_dir: PathBuf,

    /// kubelet's client certificate and key, for --bootstrap-mode kubeletcertificate.
    #[arg(
        long,
        default_value = "/var/lib/kubelet/pki/kubelet-client-current.pem",
        value_name = "FILE"
    )]
    pub kubelet_client_certificate: PathBuf,

    /// The cluster CA, for --bootstrap-mode kubeletcertificate.
    #[arg(
        long,
        default_value = "/etc/kubernetes/pki/ca.crt",
        value_name = "FILE"
    )]
    pub kubelet_ca_file: PathBuf,
}

impl CertificateArgs {
    /// With --kubeconfig the certificate manager does not run: the flags given for it are
    /// named in a warning.
    pub fn warnings(&self, kubeconfig_given: bool) -> Vec<String> {
        let given = self.bootstrap_file.is_some()
            || self.join_token.is_some()
            || !self.discovery_token_ca_cert_hash.is_empty()
            || !self.hub_cert_organizations.is_empty()
            || self.bootstrap_mode == BootstrapMode::Kubeletcertificate;
        if kubeconfig_given && given {
            vec![
                "--bootstrap-mode, --bootstrap-file, --join-token, --discovery-token-*, \
                 --hub-cert-organizations ignored: --kubeconfig gives the gateway's credentials"
                    .to_owned(),
            ]
        } else {
            Vec::new()
        }
    }
}
