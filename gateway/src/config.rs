//! The gateway's checked configuration, built from the command line and the kubeconfig.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use crate::cli::RunArgs;
use crate::upstream::{Credentials, CredentialsError, HealthSettings, LbMode};

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
    /// The HTTPS proxy's certificate or key cannot be used.
    #[error(transparent)]
    Tls(#[from] crate::server::TlsError),
}

/// Everything the gateway needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Upstream apiservers, in priority order.
    pub servers: Vec<http::Uri>,
    /// The gateway's own identity towards them.
    pub credentials: Credentials,
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
    /// [`crate::server::START_UP_SYNC`] passed), so that the binary can give back the pages
    /// of code only start-up ran; `None` does nothing.
    pub after_start: Option<fn()>,
    /// Components whose responses are cached.
    pub cache_agents: Vec<String>,
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
        let credentials = match &args.kubeconfig {
            Some(path) => Credentials::from_kubeconfig(path).await?,
            None => Credentials::anonymous()?,
        };
        let servers = if args.server_addr.is_empty() {
            credentials
                .default_server
                .clone()
                .map(|s| vec![s])
                .ok_or(ConfigError::NoServer)?
        } else {
            args.server_addr.clone()
        };
        Ok(Config {
            servers,
            credentials,
            lb_mode: args.lb_mode,
            node_name: args.node_name.clone(),
            nodepool_name: args.nodepool_name.clone(),
            hub_addr: SocketAddr::new(args.bind_address, args.serve_port),
            proxy_addr: SocketAddr::new(args.bind_proxy_address, args.proxy_port),
            secure_proxy: match (&args.tls_cert_file, &args.tls_private_key_file) {
                (Some(cert), Some(key)) => Some((
                    SocketAddr::new(args.bind_proxy_address, args.proxy_secure_port),
                    crate::server::server_config(cert, key)?,
                )),
                _ => None,
            },
            disk_cache_path: args.disk_cache_path.clone(),
            filter_dir: args.filter_dir.clone(),
            filter_config: args.filter_config.clone(),
            filter_helper: None,
            return_freed_memory: None,
            after_start: None,
            cache_agents: if args.cache_agents.is_empty() {
                crate::cache::DEFAULT_CACHE_AGENTS
                    .iter()
                    .map(|a| (*a).to_owned())
                    .collect()
            } else {
                args.cache_agents.clone()
            },
            cache_gc_after: args.cache_gc_after,
            health: HealthSettings {
                interval: Duration::from_secs(args.heartbeat_interval_seconds),
                timeout: Duration::from_secs(args.heartbeat_timeout_seconds),
                failed_retry: args.heartbeat_failed_retry,
                healthy_threshold: args.heartbeat_healthy_threshold,
                node_name: args.node_name.clone(),
                kubelet: Arc::default(),
            },
            request_timeout: Duration::from_secs(args.request_timeout_seconds),
            shutdown_grace: Duration::from_secs(args.shutdown_grace_seconds),
        })
    }
}
