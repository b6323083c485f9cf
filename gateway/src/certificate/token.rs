//! The certificate manager's start: the bootstrap credential, the first client
//! certificate, and the renewals to run.

use kube::config::Kubeconfig;
use std::path::{Path, PathBuf};

use super::discovery;
use super::error::CertificateError;
use super::pem::leaf_of;
use super::pins::{CaPins, JoinToken};
use super::renewal::{Renewal, Subject, retry_after};
use super::request::organizations;
use super::settings::{BootstrapMode, CertificateSettings};
use super::store::{PairKind, Store, io_error, kubeconfig};

impl CertificateSettings {
    /// Whether the certificate manager has anything to do: a bootstrap credential, kubelet's
    /// certificate, or a certificate a previous start left under `--root-dir`.
    pub fn applies(&self) -> bool {
        self.mode == BootstrapMode::Kubeletcertificate
            || self.join_token.is_some()
            || self.bootstrap_file.is_some()
            || Store::new(&self.root_dir).is_ok_and(|s| s.kubeconfig().exists())
    }
}

/// The gateway's identity, ready: a kubeconfig naming the CA and the pair's files, and the
/// loops that renew its pairs.
#[derive(Debug)]
pub struct Prepared {
    /// The kubeconfig the upstream transport loads.
    pub kubeconfig: PathBuf,
    /// Renew the client certificate (token mode) and the serving certificate (when asked
    /// for); run them for the gateway's life.
    pub renewals: Vec<Renewal>,
    /// The serving pair's file (certificate chain, then key) when it is requested: it may
    /// not exist yet, as the request waits for an approver.
    pub serving_pair: Option<PathBuf>,
}

/// Sets up the gateway's identity; in token mode, waits for a first certificate when there
/// is none yet (retrying while the cloud cannot give one).
pub async fn prepare(
    settings: &CertificateSettings,
    servers: &[http::Uri],
) -> Result<Prepared, CertificateError> {
    let server = servers.first().ok_or(CertificateError::NoServer)?;
    let store = Store::new(&settings.root_dir)?;
    store.create_dirs()?;
    let mut renewals = Vec::new();
    let (kubeconfig, node) = if settings.mode == BootstrapMode::Kubeletcertificate {
        let ca =
            std::fs::read(&settings.kubelet_ca).map_err(|e| io_error(&settings.kubelet_ca, e))?;
        let pair = settings.kubelet_pair.display().to_string();
        let user = serde_json::json!({"client-certificate": pair, "client-key": pair});
        let path = store.root_dir_file("kubelet-certificate.conf");
        store.write_file(&path, &kubeconfig(server, &ca, user))?;
        // kubelet's certificate names the node when the flags do not.
        let node = settings.node_name.clone().or_else(|| {
            let pem = std::fs::read(&settings.kubelet_pair).ok()?;
            let (_, cn) = leaf_of(&pem).ok()?;
            cn.strip_prefix("system:node:").map(str::to_owned)
        });
        (path, node)
    } else {
        let node = settings.node_name.clone().unwrap_or_default();
        let client = Renewal::new(
            store.clone(),
            servers.to_vec(),
            Subject::Client {
                common_name: format!("system:node:{node}"),
                organizations: organizations(&settings.organizations),
            },
            bootstrap_kubeconfig(settings, &store, server).await?,
        );
        let ca = std::fs::read(store.ca_file()).map_err(|e| io_error(&store.ca_file(), e))?;
        let pair = store.current_pair(PairKind::Client).display().to_string();
        let user = serde_json::json!({"client-certificate": pair, "client-key": pair});
        store.write_file(&store.kubeconfig(), &kubeconfig(server, &ca, user))?;
        if client.has_own() {
            tracing::info!(%pair, "using the client certificate under --root-dir");
        } else {
            let mut attempt = 0;
            while let Err(error) = client.renew(true).await {
                if !error.is_transient() {
                    return Err(error);
                }
                let wait = retry_after(attempt);
                tracing::warn!(error = %crate::error::error_chain(&error), ?wait, "no client certificate yet; trying again");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
        }
        renewals.push(client);
        (store.kubeconfig(), Some(node))
    };
    let mut serving_pair = None;
    match (&settings.serving_names, node) {
        (Some(names), Some(node)) => {
            let mut names = names.clone();
            if !names.contains(&node) {
                names.push(node.clone());
            }
            let serving = Renewal::new(
                store.clone(),
                servers.to_vec(),
                Subject::Serving {
                    common_name: format!("system:node:{node}"),
                    names,
                    kubeconfig: kubeconfig.clone(),
                },
                None,
            );
            serving_pair = Some(store.current_pair(PairKind::Serving));
            renewals.push(serving);
        }
        (Some(_), None) => tracing::warn!(
            "no serving certificate is requested for the HTTPS proxy: the node's name is \
             unknown (give --node-name)"
        ),
        (None, _) => {}
    }
    Ok(Prepared {
        kubeconfig,
        renewals,
        serving_pair,
    })
}

/// The bootstrap kubeconfig: `--bootstrap-file`, or one written from `--join-token` (the
/// CA found by discovery the first time, then kept in `pki/ca.crt`).
async fn bootstrap_kubeconfig(
    settings: &CertificateSettings,
    store: &Store,
    server: &http::Uri,
) -> Result<Option<PathBuf>, CertificateError> {
    if let Some(file) = &settings.bootstrap_file {
        if !store.ca_file().exists() {
            let text = std::fs::read_to_string(file).map_err(|e| io_error(file, e))?;
            let ca = ca_of_file(file, &text)?;
            store.write_file(&store.ca_file(), &ca)?;
        }
        return Ok(Some(file.clone()));
    }
    let Some(token) = &settings.join_token else {
        if store.ca_file().exists() {
            // One an earlier start or `/v1/token` wrote.
            let written = store.bootstrap_kubeconfig();
            return Ok(written.exists().then_some(written));
        }
        return Err(CertificateError::NoCredentials);
    };
    let token = JoinToken::parse(token)?;
    let pins = CaPins::parse(&settings.ca_pins)?;
    if !store.ca_file().exists() {
        let mut attempt = 0;
        let ca = loop {
            match discovery::cluster_ca(server, &token, &pins, settings.skip_ca_verification).await
            {
                Ok(ca) => break ca,
                Err(error) if error.is_transient() => {
                    let wait = retry_after(attempt);
                    tracing::warn!(error = %crate::error::error_chain(&error), ?wait, "token discovery failed; trying again");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        };
        tracing::info!(%server, "cluster CA found by token discovery");
        store.write_file(&store.ca_file(), &ca)?;
    }
    let ca = std::fs::read(store.ca_file()).map_err(|e| io_error(&store.ca_file(), e))?;
    let user = serde_json::json!({"token": token.bearer()});
    store.write_file(
        &store.bootstrap_kubeconfig(),
        &kubeconfig(server, &ca, user),
    )?;
    Ok(Some(store.bootstrap_kubeconfig()))
}

/// The CA of a bootstrap kubeconfig: its data, or the file it names.
fn ca_of_file(path: &Path, text: &str) -> Result<Vec<u8>, CertificateError> {
    if let Ok(ca) = discovery::ca_of(text) {
        return Ok(ca);
    }
    let config = Kubeconfig::from_yaml(text).map_err(|source| CertificateError::Kubeconfig {
        path: path.to_owned(),
        source,
    })?;
    let file = config
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.certificate_authority.clone())
        .ok_or_else(|| CertificateError::Discovery(format!("{} names no CA", path.display())))?;
    let file = path.parent().unwrap_or(Path::new("/")).join(file);
    std::fs::read(&file).map_err(|e| io_error(&file, e))
}
