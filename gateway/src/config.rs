//! The gateway's checked configuration, built from the command line and the kubeconfig.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use crate::certificate::CertificateSettings;
use crate::certificate::request::APISERVER_NAMES;
use crate::certificate::{BootstrapMode, CertificateError, Renewal};
use crate::cli::{self, CertificateArgs, EDGE_ONLY_FILTERS, RunArgs, WorkingMode};
use crate::tls::ClientCerts;
use crate::upstream::{Credentials, CredentialsError, HealthSettings, LbMode};

/// YurtHub's `--multiplexer-port` default.
pub const DEFAULT_MULTIPLEXER_PORT: u16 = 10269;

/// Why the configuration is unusable; every variant is the operator's to fix.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// Neither `--server-addr` nor the kubeconfig names a server.
    #[error(
        "no apiserver to talk to: give --server-addr, or a --kubeconfig whose current context has a server"
    )]
    NoServer,
    /// The kubeconfig could not be used.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// `--working-mode local`, which edgegate does not have.
    #[error(
        "--working-mode local is not supported: edgegate has no local mode (a proxy to a host \
         cluster's apiservers); use edge or cloud"
    )]
    LocalMode,
    /// The HTTPS proxy's certificate or key cannot be used.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The hub interface's name or address is not one YurtHub accepts.
    #[error("{0}")]
    HubInterface(String),
    /// The certificate manager could not set up the gateway's identity.
    #[error(transparent)]
    Certificate(#[from] CertificateError),
    /// A `--pool-scope-resources` entry cannot be read.
    #[error(transparent)]
    PoolScope(#[from] crate::multiplexer::ResourceError),
    /// The certificate manager needs the node's name for the certificate.
    #[error("the certificate manager needs --node-name (the certificate is system:node:<name>)")]
    NoNodeName,
}

/// The hub interface (`--enable-dummy-if`): a dummy link and its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubInterfaceSettings {
    /// `--hub-interface-name`.
    pub name: String,
    /// `--hub-interface-ip`.
    pub ip: IpAddr,
}

/// Everything the gateway needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Upstream apiservers, in priority order.
    pub servers: Vec<http::Uri>,
    /// The gateway's own identity towards them.
    pub credentials: Credentials,
    /// Renew the certificates of the certificate manager: the client certificate (token
    /// mode) and the HTTPS proxy's serving certificate (without --tls-cert-file).
    pub certificate_renewals: Vec<Arc<Renewal>>,
    /// How requests are spread over the servers.
    pub lb_mode: LbMode,
    /// This node's name.
    pub node_name: Option<String>,
    /// This node's pool.
    pub nodepool_name: Option<String>,
    /// Where the hub server listens.
    pub hub_addr: SocketAddr,
    /// Where the plain-HTTP proxy listens.
    pub proxy_addr: SocketAddr,
    /// Where the HTTPS proxy listens, and its TLS settings, when it is served.
    pub secure_proxy: Option<(SocketAddr, std::sync::Arc<rustls::ServerConfig>)>,
    /// Where the pool port listens (--node-ip, --multiplexer-port), and its TLS settings:
    /// served with the HTTPS proxy's certificate, to node client certificates only.
    pub pool_port: Option<(SocketAddr, std::sync::Arc<rustls::ServerConfig>)>,
    /// The port of the pool's leaders' pool ports (--multiplexer-port).
    pub leader_port: u16,
    /// The hub interface, made when the HTTPS proxy is served: it also listens on its
    /// address.
    pub hub_interface: Option<HubInterfaceSettings>,
    /// Directory of the local cache.
    pub disk_cache_path: PathBuf,
    /// Directory of the Wasm filters.
    pub filter_dir: Option<PathBuf>,
    /// The gateway-level filter settings file.
    pub filter_config: Option<PathBuf>,
    /// The `edgegate` binary that compiles new filters and checks their configs in a child
    /// process (`filter compile`, `filter check-config`); `None` does both in the gateway's
    /// process. The binary sets it to itself.
    pub filter_helper: Option<PathBuf>,
    /// Hands back to the system the memory the process freed (glibc keeps freed blocks
    /// inside its heaps): called after each filter load, and off the runtime's threads every
    /// [`crate::server::RETURN_FREED_EVERY`], as lists and watches free megabytes in the
    /// middle of the heaps, where trimming their tops does not reach; `None` does nothing.
    pub return_freed_memory: Option<fn()>,
    /// Called once, off the runtime's threads, when start-up is over: the gateway serving,
    /// its first filters loaded and their informers synced (or
    /// [`crate::informer::START_UP_SYNC`] passed), so that the binary can give back the pages
    /// of code only start-up ran; `None` does nothing.
    pub after_start: Option<fn()>,
    /// Components whose responses are cached.
    pub cache_agents: Vec<String>,
    /// The resources the multiplexer shares among the node's clients (none: no multiplexer).
    pub pool_scope_resources: Vec<crate::multiplexer::Resource>,
    /// Cloud mode (`--working-mode cloud`): nothing cached, no health checker, every
    /// apiserver taken as healthy.
    pub cloud: bool,
    /// Filters turned off by the command line, by YurtHub's names (`*`: all).
    pub disabled_filters: Vec<String>,
    /// The shortest an offline watch without `timeoutSeconds` lasts (it lasts a random
    /// time between once and twice this).
    pub min_request_timeout: Duration,
    /// Non-long-running requests served at once beyond which others get `429`; 0: no limit.
    pub max_requests_in_flight: usize,
    /// Unused components' caches are removed after this long.
    pub cache_gc_after: Duration,
    /// Upstream health checking.
    pub health: HealthSettings,
    /// How long a proxied request may wait for its response to begin.
    pub request_timeout: Duration,
    /// How long in-flight requests are given when the gateway is asked to stop.
    pub shutdown_grace: Duration,
}

impl Config {
    /// Checks the flags and loads the kubeconfig they name.
    pub async fn load(args: &RunArgs) -> Result<Config, ConfigError> {
        let yurthub = &args.yurthub;
        if yurthub.working_mode == WorkingMode::Local {
            return Err(ConfigError::LocalMode);
        }
        let cloud = yurthub.working_mode == WorkingMode::Cloud;
        let hub_interface = yurthub
            .enable_dummy_if
            .then(|| hub_interface(args))
            .transpose()?;
        let identity = identity(args, hub_interface.as_ref()).await?;
        let credentials = identity.credentials;
        let servers = if args.server_addr.is_empty() {
            credentials
                .default_server
                .clone()
                .map(|s| vec![s])
                .ok_or(ConfigError::NoServer)?
        } else {
            args.server_addr.clone()
        };
        let secure_addr = SocketAddr::new(args.bind_proxy_address, args.proxy_secure_port);
        let serving = match (
            &args.tls_cert_file,
            &args.tls_private_key_file,
            &identity.serving_pair,
        ) {
            (Some(cert), Some(key), _) => Some((cert, key, false)),
            (None, _, Some(pair)) => Some((pair, pair, true)),
            _ => None,
        };
        let tls = |client_certs| -> Result<_, ConfigError> {
            Ok(match serving {
                Some((cert, key, issued_later)) => Some(crate::tls::server_config(
                    cert,
                    key,
                    credentials.cluster_ca(),
                    issued_later,
                    client_certs,
                )?),
                None => None,
            })
        };
        let secure_proxy = tls(ClientCerts::Optional)?.map(|tls| (secure_addr, tls));
        let leader_port = yurthub.multiplexer_port.unwrap_or(DEFAULT_MULTIPLEXER_PORT);
        // A cloud node is in no edge pool.
        let pool_port = match yurthub.node_ip {
            Some(ip) if !cloud => {
                tls(ClientCerts::Required)?.map(|tls| (SocketAddr::new(ip, leader_port), tls))
            }
            _ => None,
        };
        Ok(Config {
            servers,
            credentials,
            certificate_renewals: identity.renewals,
            lb_mode: match args.lb_mode {
                cli::LbMode::Rr => LbMode::Rr,
                cli::LbMode::Priority => LbMode::Priority,
            },
            node_name: args.node_name.clone(),
            nodepool_name: args.nodepool_name.clone(),
            hub_addr: SocketAddr::new(args.bind_address, args.serve_port),
            proxy_addr: SocketAddr::new(args.bind_proxy_address, args.proxy_port),
            secure_proxy,
            pool_port,
            leader_port,
            hub_interface,
            disk_cache_path: args.disk_cache_path.clone(),
            filter_dir: args.filter_dir.clone(),
            filter_config: args.filter_config.clone(),
            filter_helper: None,
            return_freed_memory: None,
            after_start: None,
            cache_agents: cache_agents(&args.cache_agents),
            pool_scope_resources: crate::multiplexer::Resource::parse_all(
                yurthub.pool_scope_resources.as_deref(),
            )?,
            cloud,
            disabled_filters: disabled_filters(args),
            min_request_timeout: yurthub.min_request_timeout,
            max_requests_in_flight: yurthub.max_requests_in_flight,
            cache_gc_after: args.cache_gc_after,
            health: HealthSettings {
                interval: Duration::from_secs(args.heartbeat_interval_seconds),
                timeout: Duration::from_secs(args.heartbeat_timeout_seconds),
                failed_retry: args.heartbeat_failed_retry,
                healthy_threshold: args.heartbeat_healthy_threshold,
                node_name: args.node_name.clone(),
                kubelet: Arc::default(),
                cloud_version: Arc::default(),
            },
            request_timeout: Duration::from_secs(args.request_timeout_seconds),
            shutdown_grace: Duration::from_secs(args.shutdown_grace_seconds),
        })
    }
}

/// The hub interface of the flags: YurtHub's default address is IPv6 when the hub server's
/// is.
fn hub_interface(args: &RunArgs) -> Result<HubInterfaceSettings, ConfigError> {
    let yurthub = &args.yurthub;
    let ip = yurthub
        .hub_interface_ip
        .unwrap_or(if args.bind_address.is_ipv6() {
            IpAddr::from([0xfd00, 0, 0, 0, 0, 0, 2, 1])
        } else {
            IpAddr::V4(crate::hub_link::DEFAULT_IP)
        });
    crate::hub_link::check(&yurthub.hub_interface_name, ip).map_err(ConfigError::HubInterface)?;
    Ok(HubInterfaceSettings {
        name: yurthub.hub_interface_name.clone(),
        ip,
    })
}

/// The gateway's identity, and what the certificate manager keeps up to date.
struct Identity {
    credentials: Credentials,
    renewals: Vec<Arc<Renewal>>,
    /// The serving pair the certificate manager requests for the HTTPS proxy.
    serving_pair: Option<PathBuf>,
}

/// The gateway's identity: from --kubeconfig, else from the certificate manager when it
/// has something to work with (which, without --tls-cert-file, also requests the HTTPS
/// proxy's serving certificate), else none.
async fn identity(
    args: &RunArgs,
    hub_interface: Option<&HubInterfaceSettings>,
) -> Result<Identity, ConfigError> {
    let none = |credentials| Identity {
        credentials,
        renewals: Vec::new(),
        serving_pair: None,
    };
    if let Some(path) = &args.kubeconfig {
        return Ok(none(Credentials::from_kubeconfig(path).await?));
    }
    let serving_names = args
        .tls_cert_file
        .is_none()
        .then(|| serving_names(args, hub_interface));
    let settings = certificate_settings(
        &args.yurthub.certificates,
        args.node_name.clone(),
        serving_names,
    );
    if !settings.applies() {
        return Ok(none(Credentials::anonymous()?));
    }
    if settings.mode == BootstrapMode::Token && settings.node_name.is_none() {
        return Err(ConfigError::NoNodeName);
    }
    let prepared = crate::certificate::prepare(&settings, &args.server_addr).await?;
    Ok(Identity {
        credentials: Credentials::from_kubeconfig(&prepared.kubeconfig).await?,
        renewals: prepared.renewals.into_iter().map(Arc::new).collect(),
        serving_pair: prepared.serving_pair,
    })
}

/// The certificate manager's settings from its flags, for the node `node_name`, requesting
/// a serving certificate for `serving_names` when given.
fn certificate_settings(
    args: &CertificateArgs,
    node_name: Option<String>,
    serving_names: Option<Vec<String>>,
) -> CertificateSettings {
    CertificateSettings {
        mode: match args.bootstrap_mode {
            cli::BootstrapMode::Token => BootstrapMode::Token,
            cli::BootstrapMode::Kubeletcertificate => BootstrapMode::Kubeletcertificate,
        },
        root_dir: args.root_dir.clone(),
        node_name,
        join_token: args.join_token.clone(),
        bootstrap_file: args.bootstrap_file.clone(),
        ca_pins: args.discovery_token_ca_cert_hash.clone(),
        skip_ca_verification: args.discovery_token_unsafe_skip_ca_verification,
        organizations: args.hub_cert_organizations.clone(),
        kubelet_pair: args.kubelet_client_certificate.clone(),
        kubelet_ca: args.kubelet_ca_file.clone(),
        serving_names,
    }
}

/// The names of the HTTPS proxy's serving certificate besides the node's, as YurtHub's: the
/// hub interface's address, the addresses it binds, loopback, and the names pods know the
/// apiserver by.
fn serving_names(args: &RunArgs, hub_interface: Option<&HubInterfaceSettings>) -> Vec<String> {
    let mut ips = vec![IpAddr::from([127, 0, 0, 1])];
    ips.extend(hub_interface.map(|hub| hub.ip));
    ips.extend([args.bind_proxy_address, args.bind_address]);
    // Where the pool's followers reach a leader.
    ips.extend(args.yurthub.node_ip);
    let mut names: Vec<String> = Vec::new();
    let ips = ips.into_iter().filter(|ip| !ip.is_unspecified());
    for name in ips
        .map(|ip| ip.to_string())
        .chain(APISERVER_NAMES.iter().map(|n| (*n).to_owned()))
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// YurtHub's default agents and, as its `cache_agents` does, the ones given.
fn cache_agents(given: &[String]) -> Vec<String> {
    crate::cache::DEFAULT_CACHE_AGENTS
        .iter()
        .map(|a| (*a).to_owned())
        .chain(given.iter().cloned())
        .collect()
}

/// The filters the command line turns off: all without --enable-resource-filter,
/// --disabled-resource-filters, and in cloud mode the ones YurtHub runs only at the edge.
fn disabled_filters(args: &RunArgs) -> Vec<String> {
    let yurthub = &args.yurthub;
    let mut disabled = yurthub.disabled_resource_filters.clone();
    if !yurthub.enable_resource_filter {
        disabled.push("*".to_owned());
    }
    if yurthub.working_mode == WorkingMode::Cloud {
        disabled.extend(EDGE_ONLY_FILTERS.iter().map(|f| (*f).to_owned()));
    }
    disabled
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    fn args(flags: &[&str]) -> RunArgs {
        let head = ["edgegate", "--server-addr", "https://10.0.0.1:6443"];
        Cli::try_parse_from(head.iter().chain(flags)).unwrap().run
    }

    async fn load(flags: &[&str]) -> Result<Config, ConfigError> {
        Config::load(&args(flags)).await
    }

    #[test]
    fn the_serving_certificate_names_the_hub_interface_loopback_and_the_apiserver() {
        let defaults = args(&[]);
        let hub = hub_interface(&defaults).unwrap();
        assert_eq!(
            serving_names(&defaults, Some(&hub)),
            [
                "127.0.0.1",
                "169.254.2.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local"
            ]
        );
        let bound = args(&[
            "--bind-proxy-address=198.18.0.5",
            "--bind-address=198.18.0.5",
        ]);
        let names = serving_names(&bound, None);
        assert_eq!(names[..2], ["127.0.0.1", "198.18.0.5"]);
        assert_eq!(names.len(), 6, "{names:?}");
    }

    #[tokio::test]
    async fn cache_agents_add_to_yurthubs_defaults() {
        let config = load(&["--cache-agents", "cilium-agent,calico"])
            .await
            .unwrap();
        let policy = crate::cache::CachePolicy::new(&config.cache_agents);
        for agent in ["kubelet", "kube-proxy", "coredns", "cilium-agent", "calico"] {
            assert!(policy.caches_component(agent), "{agent}");
        }
        assert!(!policy.caches_component("kubectl"));
        let all = load(&["--cache-agents", "*"]).await.unwrap();
        assert!(crate::cache::CachePolicy::new(&all.cache_agents).caches_component("kubectl"));
    }

    #[tokio::test]
    async fn local_mode_is_refused_at_start() {
        let error = load(&["--working-mode", "local"]).await.unwrap_err();
        assert!(matches!(error, ConfigError::LocalMode), "{error}");
        assert!(load(&["--working-mode=edge"]).await.is_ok());
    }

    #[tokio::test]
    async fn cloud_mode_turns_off_the_edge_only_filters_and_the_flags_turn_off_others() {
        let edge = load(&["--disabled-resource-filters=servicetopology,masterservice"])
            .await
            .unwrap();
        assert!(!edge.cloud);
        assert_eq!(edge.disabled_filters, ["servicetopology", "masterservice"]);
        let cloud = load(&["--working-mode=cloud"]).await.unwrap();
        assert!(cloud.cloud);
        assert_eq!(cloud.disabled_filters, EDGE_ONLY_FILTERS);
        let none = load(&["--enable-resource-filter=false"]).await.unwrap();
        assert_eq!(none.disabled_filters, ["*"]);
    }

    #[tokio::test]
    async fn the_hub_interface_is_yurthubs_and_checked() {
        let config = load(&[]).await.unwrap();
        let hub = config.hub_interface.unwrap();
        assert_eq!(
            (hub.name.as_str(), hub.ip.to_string().as_str()),
            ("yurthub-dummy0", "169.254.2.1")
        );
        let v6 = load(&["--bind-address=::1"]).await.unwrap();
        assert_eq!(v6.hub_interface.unwrap().ip.to_string(), "fd00::2:1");
        assert!(
            load(&["--enable-dummy-if=false"])
                .await
                .unwrap()
                .hub_interface
                .is_none()
        );
        let error = load(&["--dummy-if-ip=169.254.31.1"]).await.unwrap_err();
        assert!(matches!(error, ConfigError::HubInterface(_)), "{error}");
        assert!(
            load(&["--hub-interface-name=a-name-too-long-for-linux"])
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn request_limits_come_from_yurthubs_flags() {
        let config = load(&[]).await.unwrap();
        assert_eq!(config.min_request_timeout, Duration::from_secs(1800));
        assert_eq!(config.max_requests_in_flight, 250);
        let config = load(&["--min-request-timeout=90s", "--max-requests-in-flight=7"])
            .await
            .unwrap();
        assert_eq!(config.min_request_timeout, Duration::from_secs(90));
        assert_eq!(config.max_requests_in_flight, 7);
    }

    #[tokio::test]
    async fn the_certificate_manager_runs_without_kubeconfig_and_checks_its_flags_first() {
        let root = tempfile::tempdir().unwrap();
        let root_dir = format!("--root-dir={}", root.path().display());
        let no_node = load(&["--join-token=abcdef.0123456789abcdef", &root_dir]).await;
        assert!(
            matches!(no_node, Err(ConfigError::NoNodeName)),
            "{no_node:?}"
        );
        // Refused before anything is asked of the apiserver (10.0.0.1 is not reached).
        let bad = load(&["--join-token=abcdef", "--node-name=n", &root_dir]).await;
        let error = bad.unwrap_err();
        assert!(error.to_string().contains("--join-token"), "{error}");
        let unpinned = load(&[
            "--join-token=abcdef.0123456789abcdef",
            "--node-name=n",
            &root_dir,
        ])
        .await;
        let error = unpinned.unwrap_err();
        assert!(
            error.to_string().contains("--discovery-token-ca-cert-hash"),
            "{error}"
        );
        // Nothing to bootstrap from: no identity, as before.
        let empty = tempfile::tempdir().unwrap();
        let config = load(&[&format!("--root-dir={}", empty.path().display())])
            .await
            .unwrap();
        assert!(config.certificate_renewals.is_empty());
        assert!(config.secure_proxy.is_none());
    }
}
