//! Renewing the gateway's certificates. When, as client-go's certificate manager decides it:
//! at a random point between 70 % and 90 % of the lifetime, so that a fleet of nodes issued
//! at once does not renew at once (pure functions of the certificate and a clock); and the
//! loop that does it, for the client certificate and for the HTTPS proxy's serving one.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Service;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::error::CertificateError;
use super::pem::{Validity, leaf_of};
use super::pins::JoinToken;
use super::request::{
    CLIENT_USAGES, SERVING_SIGNER, SERVING_USAGES, csr_object, new_request, new_serving_request,
    signer_for, submit,
};
use super::store::{PairKind, Store, io_error, kubeconfig};

/// When to renew: `not_before + lifetime × (0.7 + 0.2 × jitter)`, `jitter` in `[0, 1)`.
pub fn renewal_deadline(validity: Validity, jitter: f64) -> SystemTime {
    let lifetime = validity
        .not_after
        .duration_since(validity.not_before)
        .unwrap_or(Duration::ZERO);
    let fraction = 0.7 + 0.2 * jitter.clamp(0.0, 1.0);
    validity.not_before + lifetime.mul_f64(fraction)
}

/// How long to wait at `now` for `deadline` (none once it passed).
pub fn wait_until(now: SystemTime, deadline: SystemTime) -> Duration {
    deadline.duration_since(now).unwrap_or(Duration::ZERO)
}

/// The wait before retry number `attempt` (0-based) of a failed renewal: doubling from 1 s,
/// at most 5 minutes.
pub fn retry_after(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.min(9)).min(Duration::from_secs(300))
}

/// What a renewal asks for, and on whose credentials.
#[derive(Clone, Debug)]
pub enum Subject {
    /// The client certificate, requested on the current pair while it is valid
    /// (`selfnodeclient`), else on the bootstrap kubeconfig, when there is one.
    Client {
        /// `system:node:<node>`.
        common_name: String,
        /// `system:nodes` and `--hub-cert-organizations`.
        organizations: Vec<String>,
    },
    /// The HTTPS proxy's serving certificate, requested on the client identity.
    Serving {
        /// `system:node:<node>`.
        common_name: String,
        /// Its IP addresses and DNS names; the `default/kubernetes` Service's cluster IP is
        /// added when it can be read (pods redirected from it reach the proxy by it).
        names: Vec<String>,
        /// The kubeconfig of the client identity.
        kubeconfig: PathBuf,
    },
}

/// Renews one of the gateway's certificates before it expires.
#[derive(Debug)]
pub struct Renewal {
    store: Store,
    servers: Vec<http::Uri>,
    subject: Subject,
    /// The bootstrap kubeconfig of a client certificate: `--bootstrap-file`, or the one
    /// written from `--join-token` or by [`Renewal::update_join_token`].
    bootstrap: Mutex<Option<PathBuf>>,
}

impl Renewal {
    /// The renewal of `subject`'s pair in `store`, asking `servers` in turn; a client
    /// certificate falls back on `bootstrap` when it has no valid pair.
    pub fn new(
        store: Store,
        servers: Vec<http::Uri>,
        subject: Subject,
        bootstrap: Option<PathBuf>,
    ) -> Renewal {
        Renewal {
            store,
            servers,
            subject,
            bootstrap: Mutex::new(bootstrap),
        }
    }

    /// Takes a new bootstrap token (YurtHub's `/v1/token`), for when the client certificate
    /// and the token it was first requested with have both expired: the bootstrap
    /// kubeconfig is rewritten with it (the cluster CA kept) and used from then on.
    pub fn update_join_token(&self, token: &str) -> Result<(), CertificateError> {
        if self.kind() != PairKind::Client {
            return Err(CertificateError::NoCredentials);
        }
        let token = JoinToken::parse(token)?;
        let server = self.servers.first().ok_or(CertificateError::NoServer)?;
        let ca_file = self.store.ca_file();
        let ca = std::fs::read(&ca_file).map_err(|e| io_error(&ca_file, e))?;
        let path = self.store.bootstrap_kubeconfig();
        let user = serde_json::json!({"token": token.bearer()});
        self.store
            .write_file(&path, &kubeconfig(server, &ca, user))?;
        tracing::info!(file = %path.display(), "bootstrap token updated");
        *self.bootstrap.lock().unwrap_or_else(|p| p.into_inner()) = Some(path);
        Ok(())
    }

    /// Which pair this renews.
    pub fn kind(&self) -> PairKind {
        match self.subject {
            Subject::Client { .. } => PairKind::Client,
            Subject::Serving { .. } => PairKind::Serving,
        }
    }

    /// The common name the pair must have.
    fn common_name(&self) -> &str {
        match &self.subject {
            Subject::Client { common_name, .. } | Subject::Serving { common_name, .. } => {
                common_name
            }
        }
    }

    /// Renews the certificate at each deadline, for ever; failures are retried.
    pub async fn run(&self) {
        let what = self.kind().describe();
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
                tracing::warn!(?wait, "the {what} is due for renewal again; waiting");
                tokio::time::sleep(wait).await;
            }
            tracing::info!(deadline = %humantime::format_rfc3339_seconds(deadline), "{what} renewal scheduled");
            // In steps, so that a suspended machine or a changed clock is noticed.
            loop {
                let wait = wait_until(SystemTime::now(), deadline);
                if wait.is_zero() {
                    break;
                }
                tokio::time::sleep(wait.min(Duration::from_secs(30))).await;
            }
            match self.renew(false).await {
                Ok(()) => {
                    let due = self.current().is_none_or(|(validity, _)| {
                        renewal_deadline(validity, 0.0) <= SystemTime::now()
                    });
                    attempt = if due { attempt + 1 } else { 0 };
                }
                Err(error) => {
                    tracing::warn!(error = %crate::error::error_chain(&error), "{what} renewal failed");
                    attempt += 1;
                }
            }
        }
    }

    /// The current pair's validity and common name, if there is one that parses.
    pub fn current(&self) -> Option<(Validity, String)> {
        let pem = std::fs::read(self.store.current_pair(self.kind())).ok()?;
        leaf_of(&pem).ok()
    }

    /// Whether a pair for this subject is in place (valid or not: an expired one is
    /// renewed by [`Renewal::run`], and meanwhile a gateway offline still serves).
    pub fn has_own(&self) -> bool {
        self.current()
            .is_some_and(|(_, cn)| cn == self.common_name())
    }

    /// Requests a new pair and makes it current. `first`: the client pair is requested on
    /// the bootstrap credential even if a current pair is valid.
    pub async fn renew(&self, first: bool) -> Result<(), CertificateError> {
        let kubeconfig = match &self.subject {
            Subject::Client { .. } => {
                let current_valid = !first
                    && self
                        .current()
                        .is_some_and(|(validity, _)| validity.valid_at(SystemTime::now()));
                if current_valid {
                    self.store.kubeconfig()
                } else {
                    let bootstrap = self.bootstrap.lock().unwrap_or_else(|p| p.into_inner());
                    bootstrap.clone().ok_or(CertificateError::NoCredentials)?
                }
            }
            Subject::Serving { kubeconfig, .. } => kubeconfig.clone(),
        };
        let mut last = None;
        for server in &self.servers {
            let client = client_for(&kubeconfig, server).await?;
            let (key, csr) = match &self.subject {
                Subject::Client {
                    common_name,
                    organizations,
                    ..
                } => {
                    let (key, request) = new_request(common_name, organizations)?;
                    let csr = csr_object(&request, signer_for(organizations), &CLIENT_USAGES);
                    (key, csr)
                }
                Subject::Serving {
                    common_name, names, ..
                } => {
                    let mut names = names.clone();
                    if let Some(ip) = kubernetes_cluster_ip(client.clone()).await
                        && !names.contains(&ip)
                    {
                        names.push(ip);
                    }
                    let (key, request) = new_serving_request(common_name, &names)?;
                    (key, csr_object(&request, SERVING_SIGNER, &SERVING_USAGES))
                }
            };
            match submit(client, &csr).await {
                Ok(chain) => {
                    leaf_of(&chain)?;
                    let file = self
                        .store
                        .write_pair(self.kind(), &chain, &key.serialize_pem())?;
                    tracing::info!(pair = %file.display(), "{} issued and in use", self.kind().describe());
                    return Ok(());
                }
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or(CertificateError::NoServer))
    }
}

/// The cluster IP of the `default/kubernetes` Service, when it can be read.
async fn kubernetes_cluster_ip(client: kube::Client) -> Option<String> {
    let services: kube::Api<Service> = kube::Api::namespaced(client, "default");
    match services.get("kubernetes").await {
        Ok(service) => service
            .spec
            .and_then(|spec| spec.cluster_ip)
            .filter(|ip| ip.parse::<std::net::IpAddr>().is_ok()),
        Err(error) => {
            tracing::info!(error = %crate::error::error_chain(&error), "the default/kubernetes Service's cluster IP is not named by the serving certificate");
            None
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn renewal_falls_between_70_and_90_percent_of_the_lifetime() {
        let validity = Validity {
            not_before: at(1000),
            not_after: at(2000),
        };
        assert_eq!(renewal_deadline(validity, 0.0), at(1700));
        assert_eq!(renewal_deadline(validity, 0.5), at(1800));
        for _ in 0..1000 {
            let deadline = renewal_deadline(validity, fastrand::f64());
            assert!(at(1700) <= deadline && deadline < at(1900), "{deadline:?}");
        }
        // Out-of-range jitter is clamped.
        assert_eq!(renewal_deadline(validity, 7.0), at(1900));
    }

    #[test]
    fn a_deadline_passed_means_renew_now() {
        assert_eq!(wait_until(at(10), at(25)), Duration::from_secs(15));
        assert_eq!(wait_until(at(30), at(25)), Duration::ZERO);
        let validity = Validity {
            not_before: at(100),
            not_after: at(200),
        };
        assert!(validity.valid_at(at(100)) && validity.valid_at(at(199)));
        assert!(!validity.valid_at(at(200)) && !validity.valid_at(at(99)));
    }

    #[test]
    fn a_new_join_token_rewrites_the_bootstrap_kubeconfig_and_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path()).unwrap();
        store.create_dirs().unwrap();
        std::fs::write(store.ca_file(), b"CA PEM").unwrap();
        let client = Renewal::new(
            store.clone(),
            vec!["https://198.18.0.1:6443".parse().unwrap()],
            Subject::Client {
                common_name: "system:node:n".to_owned(),
                organizations: vec!["system:nodes".to_owned()],
            },
            None,
        );
        assert!(matches!(
            client.update_join_token("not-a-token"),
            Err(CertificateError::BadToken)
        ));
        assert!(!store.bootstrap_kubeconfig().exists());
        client.update_join_token("abcdef.0123456789abcdef").unwrap();
        let written = std::fs::read_to_string(store.bootstrap_kubeconfig()).unwrap();
        assert!(written.contains("abcdef.0123456789abcdef"), "{written}");
        assert!(written.contains("https://198.18.0.1:6443"), "{written}");
        let bootstrap = client.bootstrap.lock().unwrap().clone();
        assert_eq!(bootstrap, Some(store.bootstrap_kubeconfig()));
        // A serving certificate has no token to update.
        let serving = Renewal::new(
            store.clone(),
            vec!["https://198.18.0.1:6443".parse().unwrap()],
            Subject::Serving {
                common_name: "system:node:n".to_owned(),
                names: vec!["127.0.0.1".to_owned()],
                kubeconfig: store.kubeconfig(),
            },
            None,
        );
        assert!(
            serving
                .update_join_token("abcdef.0123456789abcdef")
                .is_err()
        );
    }

    #[test]
    fn retries_back_off_to_five_minutes() {
        let waits: Vec<u64> = (0..12).map(|n| retry_after(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
    }
}
