//! The gateway's checked configuration, built from the command line: plain data, parsed
//! and checked, nothing read from disk or the network. What it names (the kubeconfig, the
//! certificate manager's files, the serving pair) the server's identity builder reads.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::certificate::settings::{APISERVER_NAMES, BootstrapMode, CertificateSettings};
use crate::cli::{self, CertificateArgs, EDGE_ONLY_FILTERS, RunArgs, WorkingMode};
use crate::hub_link::address as hub_address;
use crate::node::multiplexer::resource::{Resource, ResourceError};
use crate::upstream::lb_mode::LbMode;

/// YurtHub's `--multiplexer-port` default.
pub const DEFAULT_MULTIPLEXER_PORT: u16 = 10269;

/// Why the configuration is unusable; every variant is the operator's to fix.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// `--working-mode local`, which edgegate does not have.
    #[error(
        "--working-mode local is not supported: edgegate has no local mode (a proxy to a host \
         cluster's apiservers); use edge or cloud"
    )]
    LocalMode,
    /// The hub interface's name or address is not one YurtHub accepts.
    #[error("{0}")]
    HubInterface(String),
    /// A `--pool-scope-resources` entry cannot be read.
    #[error(transparent)]
    PoolScope(#[from] ResourceError),
}

/// The hub interface (`--enable-dummy-if`): a dummy link and its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubInterfaceSettings {
    /// `--hub-interface-name`.
    pub name: String,
    /// `--hub-interface-ip`.
    pub ip: IpAddr,
}

/// Where the gateway's identity comes from: a kubeconfig, or the certificate manager; and
/// the HTTPS proxy's serving pair when the flags give its files.
#[derive(Debug, Clone)]
pub struct IdentitySettings {
    /// `--kubeconfig`: the identity, whole.
    pub kubeconfig: Option<PathBuf>,
    /// The certificate manager's settings, without `--kubeconfig`.
    pub certificates: CertificateSettings,
    /// `--tls-cert-file` and `--tls-private-key-file`.
    pub serving_files: Option<(PathBuf, PathBuf)>,
}

/// Upstream health checking, as the flags set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthConfig {
    /// `--heartbeat-interval-seconds`.
    pub interval: Duration,
    /// `--heartbeat-timeout-seconds`.
    pub timeout: Duration,
    /// `--heartbeat-failed-retry`.
    pub failed_retry: u32,
    /// `--heartbeat-healthy-threshold`.
    pub healthy_threshold: u32,
}

/// Everything the gateway needs to run, as data.
#[derive(Debug, Clone)]
pub struct Config {
    /// Upstream apiservers, in priority order (none given: the kubeconfig's).
    pub servers: Vec<http::Uri>,
    /// Where the gateway's identity towards them comes from.
    pub identity: IdentitySettings,
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
    /// Where the HTTPS proxy listens, when it is served (it has a serving pair).
    pub secure_proxy_addr: SocketAddr,
    /// Where the pool port listens (--node-ip, --multiplexer-port), at the edge: served with
    /// the HTTPS proxy's certificate, to node client certificates only.
    pub pool_port: Option<SocketAddr>,
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
    /// Whether the filters the cluster declares for this node are run (`--filter-fleet`).
    pub filter_fleet: bool,
    /// CAs trusted for filter registries besides the system's.
    pub filter_registry_ca: Option<PathBuf>,
    /// Logins for filter registries (a Docker `config.json`).
    pub filter_registry_config: Option<PathBuf>,
    /// The `edgegate` binary that compiles new filters and checks their configs in a child
    /// process (`filter compile`, `filter check-config`); `None` does both in the gateway's
    /// process. The binary sets it to itself.
    pub filter_helper: Option<PathBuf>,
    /// Components whose responses are cached.
    pub cache_agents: Vec<String>,
    /// The resources the multiplexer shares among the node's clients (none: no multiplexer).
    pub pool_scope_resources: Vec<Resource>,
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
    pub health: HealthConfig,
    /// How long a proxied request may wait for its response to begin.
    pub request_timeout: Duration,
    /// `--upstream-http2`: HTTP/2 to the apiservers that offer it.
    pub upstream_http2: bool,
    /// How long in-flight requests are given when the gateway is asked to stop.
    pub shutdown_grace: Duration,
}

impl Config {
    /// Checks the flags: the configuration they make.
    pub fn from_args(args: &RunArgs) -> Result<Config, ConfigError> {
        let yurthub = &args.yurthub;
        if yurthub.working_mode == WorkingMode::Local {
            return Err(ConfigError::LocalMode);
        }
        let cloud = yurthub.working_mode == WorkingMode::Cloud;
        let hub_interface = yurthub
            .enable_dummy_if
            .then(|| hub_interface(args))
            .transpose()?;
        let serving_names = args
            .tls_cert_file
            .is_none()
            .then(|| serving_names(args, hub_interface.as_ref()));
        let identity = IdentitySettings {
            kubeconfig: args.kubeconfig.clone(),
            certificates: certificate_settings(
                &yurthub.certificates,
                args.node_name.clone(),
                serving_names,
            ),
            serving_files: args
                .tls_cert_file
                .clone()
                .zip(args.tls_private_key_file.clone()),
        };
        let leader_port = yurthub.multiplexer_port.unwrap_or(DEFAULT_MULTIPLEXER_PORT);
        Ok(Config {
            servers: args.server_addr.clone(),
            identity,
            lb_mode: match args.lb_mode {
                cli::LbMode::Rr => LbMode::Rr,
                cli::LbMode::Priority => LbMode::Priority,
            },
            node_name: args.node_name.clone(),
            nodepool_name: args.nodepool_name.clone(),
            hub_addr: SocketAddr::new(args.bind_address, args.serve_port),
            proxy_addr: SocketAddr::new(args.bind_proxy_address, args.proxy_port),
            secure_proxy_addr: SocketAddr::new(args.bind_proxy_address, args.proxy_secure_port),
            // A cloud node is in no edge pool.
            pool_port: yurthub
                .node_ip
                .filter(|_| !cloud)
                .map(|ip| SocketAddr::new(ip, leader_port)),
            leader_port,
            hub_interface,
            disk_cache_path: args.disk_cache_path.clone(),
            filter_dir: args.filter_dir.clone(),
            filter_config: args.filter_config.clone(),
            filter_fleet: args.filter_fleet,
            filter_registry_ca: args.filter_registry_ca.clone(),
            filter_registry_config: args.filter_registry_config.clone(),
            filter_helper: None,
            cache_agents: cache_agents(&args.cache_agents),
            pool_scope_resources: Resource::parse_all(yurthub.pool_scope_resources.as_deref())?,
            cloud,
            disabled_filters: disabled_filters(args),
            min_request_timeout: yurthub.min_request_timeout,
            max_requests_in_flight: yurthub.max_requests_in_flight,
            cache_gc_after: args.cache_gc_after,
            health: HealthConfig {
                interval: Duration::from_secs(args.heartbeat_interval_seconds),
                timeout: Duration::from_secs(args.heartbeat_timeout_seconds),
                failed_retry: args.heartbeat_failed_retry,
                healthy_threshold: args.heartbeat_healthy_threshold,
            },
            request_timeout: Duration::from_secs(args.request_timeout_seconds),
            upstream_http2: args.upstream_http2,
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
            IpAddr::V4(hub_address::DEFAULT_IP)
        });
    hub_address::check(&yurthub.hub_interface_name, ip).map_err(ConfigError::HubInterface)?;
    Ok(HubInterfaceSettings {
        name: yurthub.hub_interface_name.clone(),
        ip,
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
    cli::DEFAULT_CACHE_AGENTS
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

    fn load(flags: &[&str]) -> Result<Config, ConfigError> {
        Config::from_args(&args(flags))
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

    #[test]
    fn cache_agents_add_to_yurthubs_defaults() {
        let config = load(&["--cache-agents", "cilium-agent,calico"]).unwrap();
        let policy = crate::cache::CachePolicy::new(&config.cache_agents);
        for agent in ["kubelet", "kube-proxy", "coredns", "cilium-agent", "calico"] {
            assert!(policy.caches_component(agent), "{agent}");
        }
        assert!(!policy.caches_component("kubectl"));
        let all = load(&["--cache-agents", "*"]).unwrap();
        assert!(crate::cache::CachePolicy::new(&all.cache_agents).caches_component("kubectl"));
    }

    #[test]
    fn local_mode_is_refused_at_start() {
        let error = load(&["--working-mode", "local"]).unwrap_err();
        assert!(matches!(error, ConfigError::LocalMode), "{error}");
        assert!(load(&["--working-mode=edge"]).is_ok());
    }

    #[test]
    fn cloud_mode_turns_off_the_edge_only_filters_and_the_flags_turn_off_others() {
        let edge = load(&["--disabled-resource-filters=servicetopology,masterservice"]).unwrap();
        assert!(!edge.cloud);
        assert_eq!(edge.disabled_filters, ["servicetopology", "masterservice"]);
        let cloud = load(&["--working-mode=cloud"]).unwrap();
        assert!(cloud.cloud);
        assert_eq!(cloud.disabled_filters, EDGE_ONLY_FILTERS);
        let none = load(&["--enable-resource-filter=false"]).unwrap();
        assert_eq!(none.disabled_filters, ["*"]);
    }

    #[test]
    fn the_hub_interface_is_yurthubs_and_checked() {
        let config = load(&[]).unwrap();
        let hub = config.hub_interface.unwrap();
        assert_eq!(
            (hub.name.as_str(), hub.ip.to_string().as_str()),
            ("yurthub-dummy0", "169.254.2.1")
        );
        let v6 = load(&["--bind-address=::1"]).unwrap();
        assert_eq!(v6.hub_interface.unwrap().ip.to_string(), "fd00::2:1");
        assert!(
            load(&["--enable-dummy-if=false"])
                .unwrap()
                .hub_interface
                .is_none()
        );
        let error = load(&["--dummy-if-ip=169.254.31.1"]).unwrap_err();
        assert!(matches!(error, ConfigError::HubInterface(_)), "{error}");
        assert!(load(&["--hub-interface-name=a-name-too-long-for-linux"]).is_err());
    }

    #[test]
    fn request_limits_come_from_yurthubs_flags() {
        let config = load(&[]).unwrap();
        assert_eq!(config.min_request_timeout, Duration::from_secs(1800));
        assert_eq!(config.max_requests_in_flight, 250);
        let config = load(&["--min-request-timeout=90s", "--max-requests-in-flight=7"]).unwrap();
        assert_eq!(config.min_request_timeout, Duration::from_secs(90));
        assert_eq!(config.max_requests_in_flight, 7);
    }
}
