//! The gateway's identity, built from the configuration before anything listens: its
//! credentials towards the apiservers (a kubeconfig, or what the certificate manager
//! bootstraps and renews), the servers a kubeconfig names when the flags name none, and the
//! TLS of the HTTPS proxy and of the pool port (a serving pair from the flags, or the one
//! the certificate manager requests).

use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;

use crate::certificate::{BootstrapMode, CertificateError, Renewal};
use crate::config::Config;
use crate::tls::ClientCerts;
use crate::upstream::{Credentials, CredentialsError};

/// Why the gateway has no identity to start with; every variant is the operator's to fix.
#[derive(Debug, Error)]
pub enum IdentityError {
    /// Neither `--server-addr` nor the kubeconfig names a server.
    #[error(
        "no apiserver to talk to: give --server-addr, or a --kubeconfig whose current context has a server"
    )]
    NoServer,
    /// The kubeconfig could not be used.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// The HTTPS proxy's certificate or key cannot be used.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The certificate manager could not set up the gateway's identity.
    #[error(transparent)]
    Certificate(#[from] CertificateError),
    /// The certificate manager needs the node's name for the certificate.
    #[error("the certificate manager needs --node-name (the certificate is system:node:<name>)")]
    NoNodeName,
}

/// The gateway's identity, ready.
pub struct Identity {
    /// The apiservers, in priority order.
    pub(crate) servers: Vec<http::Uri>,
    /// The gateway's own credentials towards them.
    pub(crate) credentials: Credentials,
    /// What renews the certificate manager's pairs: the client certificate (token mode) and
    /// the HTTPS proxy's serving certificate (without `--tls-cert-file`).
    pub(crate) renewals: Vec<Arc<Renewal>>,
    /// The HTTPS proxy's TLS, when it has a serving pair.
    pub(crate) secure_proxy: Option<Arc<rustls::ServerConfig>>,
    /// The pool port's TLS (node client certificates required), when it is served.
    pub(crate) pool_port: Option<Arc<rustls::ServerConfig>>,
}

impl Identity {
    /// Reads (or bootstraps) the identity `config` names.
    pub async fn build(config: &Config) -> Result<Identity, IdentityError> {
        let (credentials, renewals, serving_pair) = credentials(config).await?;
        let servers = if config.servers.is_empty() {
            let default = credentials.default_server.clone();
            vec![default.ok_or(IdentityError::NoServer)?]
        } else {
            config.servers.clone()
        };
        let serving = match (&config.identity.serving_files, &serving_pair) {
            (Some((cert, key)), _) => Some((cert, key, false)),
            (None, Some(pair)) => Some((pair, pair, true)),
            _ => None,
        };
        let tls = |client_certs| -> Result<_, IdentityError> {
            let Some((cert, key, issued_later)) = serving else {
                return Ok(None);
            };
            let ca = credentials.cluster_ca();
            Ok(Some(crate::tls::server_config(
                cert,
                key,
                ca,
                issued_later,
                client_certs,
            )?))
        };
        let secure_proxy = tls(ClientCerts::Optional)?;
        let pool_port = match config.pool_port {
            Some(_) => tls(ClientCerts::Required)?,
            None => None,
        };
        Ok(Identity {
            servers,
            credentials,
            renewals,
            secure_proxy,
            pool_port,
        })
    }
}

/// The credentials: from `--kubeconfig`, else from the certificate manager when it has
/// something to work with (which, without `--tls-cert-file`, also requests the HTTPS
/// proxy's serving pair), else anonymous.
async fn credentials(
    config: &Config,
) -> Result<(Credentials, Vec<Arc<Renewal>>, Option<PathBuf>), IdentityError> {
    let settings = &config.identity;
    if let Some(path) = &settings.kubeconfig {
        return Ok((Credentials::from_kubeconfig(path).await?, Vec::new(), None));
    }
    let certificates = &settings.certificates;
    if !certificates.applies() {
        return Ok((Credentials::anonymous()?, Vec::new(), None));
    }
    if certificates.mode == BootstrapMode::Token && certificates.node_name.is_none() {
        return Err(IdentityError::NoNodeName);
    }
    let prepared = crate::certificate::prepare(certificates, &config.servers).await?;
    Ok((
        Credentials::from_kubeconfig(&prepared.kubeconfig).await?,
        prepared.renewals.into_iter().map(Arc::new).collect(),
        prepared.serving_pair,
    ))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    async fn build(flags: &[&str]) -> Result<Identity, IdentityError> {
        let head = ["edgegate", "--server-addr", "https://10.0.0.1:6443"];
        let args = Cli::try_parse_from(head.iter().chain(flags)).unwrap().run;
        Identity::build(&Config::from_args(&args).unwrap()).await
    }

    #[tokio::test]
    async fn the_certificate_manager_runs_without_kubeconfig_and_checks_its_flags_first() {
        let root = tempfile::tempdir().unwrap();
        let root_dir = format!("--root-dir={}", root.path().display());
        let no_node = build(&["--join-token=abcdef.0123456789abcdef", &root_dir]).await;
        assert!(
            matches!(no_node, Err(IdentityError::NoNodeName)),
            "{:?}",
            no_node.err()
        );
        // Refused before anything is asked of the apiserver (10.0.0.1 is not reached).
        let bad = build(&["--join-token=abcdef", "--node-name=n", &root_dir]).await;
        let error = bad.err().unwrap();
        assert!(error.to_string().contains("--join-token"), "{error}");
        let unpinned = build(&[
            "--join-token=abcdef.0123456789abcdef",
            "--node-name=n",
            &root_dir,
        ])
        .await;
        let error = unpinned.err().unwrap();
        assert!(
            error.to_string().contains("--discovery-token-ca-cert-hash"),
            "{error}"
        );
        // Nothing to bootstrap from: no identity, as before.
        let empty = tempfile::tempdir().unwrap();
        let identity = build(&[&format!("--root-dir={}", empty.path().display())])
            .await
            .unwrap();
        assert!(identity.renewals.is_empty());
        assert!(identity.secure_proxy.is_none());
    }
}
