//! The certificate manager's start and its renewal loop.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use clap::ValueEnum;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::pins::{CaPins, JoinToken};
use super::renewal::{renewal_deadline, retry_after, wait_until};
use super::request::{csr_object, new_request, organizations, signer_for, submit};
use super::store::{Store, io_error, kubeconfig};
use super::{CertificateError, discovery, leaf_of};

/// YurtHub's `--bootstrap-mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
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
}

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
/// loop that renews the pair (token mode).
#[derive(Debug)]
pub struct Prepared {
    /// The kubeconfig the upstream transport loads.
    pub kubeconfig: PathBuf,
    /// Renews the certificate; run it for the gateway's life.
    pub renewal: Option<Renewal>,
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
    if settings.mode == BootstrapMode::Kubeletcertificate {
        let ca =
            std::fs::read(&settings.kubelet_ca).map_err(|e| io_error(&settings.kubelet_ca, e))?;
        let pair = settings.kubelet_pair.display().to_string();
        let user = serde_json::json!({"client-certificate": pair, "client-key": pair});
        let path = store.root_dir_file("kubelet-certificate.conf");
        store.write_file(&path, &kubeconfig(server, &ca, user))?;
        return Ok(Prepared {
            kubeconfig: path,
            renewal: None,
        });
    }
    let node = settings.node_name.clone().unwrap_or_default();
    let renewal = Renewal {
        store: store.clone(),
        servers: servers.to_vec(),
        bootstrap: bootstrap_kubeconfig(settings, &store, server).await?,
        common_name: format!("system:node:{node}"),
        organizations: organizations(&settings.organizations),
    };
    let ca = std::fs::read(store.ca_file()).map_err(|e| io_error(&store.ca_file(), e))?;
    let pair = store.current_pair().display().to_string();
    let user = serde_json::json!({"client-certificate": pair, "client-key": pair});
    store.write_file(&store.kubeconfig(), &kubeconfig(server, &ca, user))?;
    match renewal.current() {
        Some((_, cn)) if cn == renewal.common_name => {
            tracing::info!(pair = %store.current_pair().display(), "using the client certificate under --root-dir");
        }
        _ => {
            let mut attempt = 0;
            while let Err(error) = renewal.renew(true).await {
                if !error.is_transient() {
                    return Err(error);
                }
                let wait = retry_after(attempt);
                tracing::warn!(error = %crate::error_chain(&error), ?wait, "no client certificate yet; trying again");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
        }
    }
    Ok(Prepared {
        kubeconfig: store.kubeconfig(),
        renewal: Some(renewal),
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
            return Ok(None);
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
                    tracing::warn!(error = %crate::error_chain(&error), ?wait, "token discovery failed; trying again");
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

/// Renews the client certificate before it expires.
#[derive(Debug)]
pub struct Renewal {
    store: Store,
    servers: Vec<http::Uri>,
    /// The bootstrap kubeconfig, when there is one: used while no valid certificate is.
    bootstrap: Option<PathBuf>,
    common_name: String,
    organizations: Vec<String>,
}

impl Renewal {
    /// Renews the certificate at each deadline, for ever; failures are retried.
    pub async fn run(&self) {
        let mut attempt = 0;
        loop {
            let now = SystemTime::now();
            let deadline = match self.current() {
                Some((validity, _)) => renewal_deadline(validity, fastrand::f64()),
                None => now,
            };
            if attempt > 0 && deadline <= now {
                // Still due after a renewal or a failure: back off rather than ask again at
                // once (an issued certificate already due means a signer that backdates
                // notBefore by more than the lifetime allows: kube-controller-manager
                // before 1.22 backdates by 5 minutes).
                let wait = retry_after(attempt - 1);
                tracing::warn!(
                    ?wait,
                    "the client certificate is due for renewal again; waiting"
                );
                tokio::time::sleep(wait).await;
            }
            tracing::info!(deadline = %humantime::format_rfc3339_seconds(deadline), "client certificate renewal scheduled");
            // In steps, so that a suspended machine or a changed clock is noticed.
            loop {
                let wait = wait_until(SystemTime::now(), deadline);
                if wait.is_zero() {
                    break;
                }
                tokio::time::sleep(wait.min(std::time::Duration::from_secs(30))).await;
            }
            match self.renew(false).await {
                Ok(()) => {
                    let due = self.current().is_none_or(|(validity, _)| {
                        renewal_deadline(validity, 0.0) <= SystemTime::now()
                    });
                    attempt = if due { attempt + 1 } else { 0 };
                }
                Err(error) => {
                    tracing::warn!(error = %crate::error_chain(&error), "client certificate renewal failed");
                    attempt += 1;
                }
            }
        }
    }

    /// The current certificate's validity and common name, if there is one that parses.
    fn current(&self) -> Option<(super::Validity, String)> {
        let pem = std::fs::read(self.store.current_pair()).ok()?;
        leaf_of(&pem).ok()
    }

    /// Requests a new pair and makes it current: on the current certificate's identity
    /// while it is valid (`selfnodeclient`), else on the bootstrap credential.
    async fn renew(&self, first: bool) -> Result<(), CertificateError> {
        let current_valid = !first
            && self
                .current()
                .is_some_and(|(validity, _)| validity.valid_at(SystemTime::now()));
        let kubeconfig = if current_valid {
            self.store.kubeconfig()
        } else {
            self.bootstrap
                .clone()
                .ok_or(CertificateError::NoCredentials)?
        };
        let (key, request) = new_request(&self.common_name, &self.organizations)?;
        let csr = csr_object(&request, signer_for(&self.organizations));
        let mut last = None;
        for server in &self.servers {
            let client = client_for(&kubeconfig, server).await?;
            match submit(client, &csr).await {
                Ok(chain) => {
                    leaf_of(&chain)?;
                    let file = self.store.write_pair(&chain, &key.serialize_pem())?;
                    tracing::info!(pair = %file.display(), "client certificate issued and in use");
                    return Ok(());
                }
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or(CertificateError::NoServer))
    }
}

/// A client on `kubeconfig`'s credentials, sent to `server`.
async fn client_for(path: &Path, server: &http::Uri) -> Result<kube::Client, CertificateError> {
    let kubeconfig_error = |source| CertificateError::Kubeconfig {
        path: path.to_owned(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(kubeconfig_error)?;
    config.cluster_url = server.clone();
    kube::Client::try_from(config).map_err(CertificateError::Api)
}
