//! The command line: YurtHub-compatible flags for running the gateway, and the operator
//! subcommands. Parsing only, with nothing of the gateway below it: [`crate::config`] turns
//! the flags into a checked [`crate::config::Config`].

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod certificates;
mod yurthub;

pub use certificates::{BootstrapMode, CertificateArgs};
pub use yurthub::{
    DEFAULT_CACHE_AGENTS, DEFAULT_HUB_INTERFACE, EDGE_ONLY_FILTERS, WorkingMode, YurtHubArgs,
    parse_go_duration,
};

/// edgegate: a node-local gateway for the Kubernetes API on edge nodes.
///
/// Node components (kubelet, kube-proxy, coredns, …) talk to edgegate instead of
/// kube-apiserver. It forwards their requests, streams each response through a chain of
/// sandboxed WebAssembly filters and tees the filtered stream to the client and to a local
/// cache, from which it answers while the cloud is unreachable.
#[derive(Debug, Parser)]
#[command(name = "edgegate", version, about, long_about)]
pub struct Cli {
    /// A tool to run instead of the gateway; without one, the gateway runs.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// The gateway's flags.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Tools that run instead of the gateway.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Tools for filter authors.
    #[command(
        subcommand,
        after_help = "Profiling: with EDGEGATE_FILTER_PERF_MAP=1 in its environment, any edgegate \
                      process that runs filters (the gateway, `filter test`) writes \
                      /tmp/perf-PID.map, so that `perf report` names the filters' functions. \
                      With EDGEGATE_FILTER_ON_DEMAND=1, filter instances are made as needed \
                      instead of from a pool that reserves terabytes of address space, so \
                      that the gateway runs under valgrind or an address-space limit."
    )]
    Filter(FilterCommand),
    /// Tools for operators: what the local cache holds. They ask the running gateway's hub
    /// (--bind-address, --serve-port), or read --disk-cache-path when no gateway runs.
    #[command(subcommand)]
    Cache(CacheCommand),
}

/// `edgegate cache …`.
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Lists the cached sets: component, resource, namespace, selectors, objects, synced
    /// resourceVersion, age.
    Ls,
    /// Prints one cached object.
    Get(CacheGetArgs),
}

/// `edgegate cache get`.
#[derive(Debug, Args)]
pub struct CacheGetArgs {
    /// The component it was served to, e.g. `kube-proxy`.
    pub component: String,
    /// The resource: `services`, `services.v1` or `endpointslices.v1beta1.discovery.k8s.io`.
    pub resource: String,
    /// `namespace/name`, or `name` for cluster-scoped objects.
    #[arg(value_name = "[NAMESPACE/]NAME")]
    pub name: String,
}

/// `edgegate filter …`.
#[derive(Debug, Subcommand)]
pub enum FilterCommand {
    /// Loads a filter component as the gateway would and prints its manifest and settings.
    Check(FilterCheckArgs),
    /// Runs a filter on one object, or a `…List` of them, read as JSON from stdin, and
    /// prints the decisions and the output.
    Test(FilterTestArgs),
    /// Measures what a filter costs per object on objects read as JSON from stdin (one
    /// object, or a `…List`), through the gateway's filter host: batched as a list is
    /// filtered, and one call per object as a watch's events are.
    Bench(FilterBenchArgs),
    /// Pushes a filter component to an OCI registry as a filter image (the Wasm OCI
    /// artifact layout) and prints its reference pinned by digest, for the cluster's
    /// `kube-system/edgegate-filters` declaration. `--filter-registry-ca` and
    /// `--filter-registry-config` apply.
    Push(FilterPushArgs),
    /// Compiles a filter component into the compiled-code store, so that a gateway using
    /// that store maps it without compiling (the gateway runs this in a child process for
    /// every new filter; operators may run it when building a node image).
    Compile(FilterCompileArgs),
    /// Checks a config against a JSON Schema, both read as JSON from stdin
    /// (`{"schema": "…", "config": …}`), and prints the verdict (`{"refused": null}` or the
    /// reason). The gateway runs this in a child process for every config it loads.
    #[command(hide = true)]
    CheckConfig,
}

/// `edgegate filter bench`.
#[derive(Debug, Args)]
pub struct FilterBenchArgs {
    /// The filter and the request, as for `edgegate filter test`.
    #[command(flatten)]
    pub request: FilterTestArgs,

    /// How long to measure each way of calling, in seconds.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
}

/// `edgegate filter push`.
#[derive(Debug, Args)]
pub struct FilterPushArgs {
    /// The filter component.
    #[arg(value_name = "FILE.wasm")]
    pub wasm: PathBuf,

    /// Where to push it: `HOST[:PORT]/REPOSITORY[:TAG]`.
    #[arg(value_name = "IMAGE")]
    pub image: String,
}

/// `edgegate filter compile`.
#[derive(Debug, Args)]
pub struct FilterCompileArgs {
    /// The filter component; `-` reads it from stdin.
    #[arg(value_name = "FILE.wasm")]
    pub wasm: PathBuf,

    /// The compiled-code store (by default `<--disk-cache-path>/_compiled-filters`).
    #[arg(long, value_name = "DIR")]
    pub compiled_cache_dir: Option<PathBuf>,
}

/// `edgegate filter check`.
#[derive(Debug, Args)]
pub struct FilterCheckArgs {
    /// The filter component.
    #[arg(value_name = "FILE.wasm")]
    pub wasm: PathBuf,

    /// Its options file (the NAME.toml the filter directory would hold).
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,

    /// A compiled-code store (as `filter compile`'s) in which the component's compiled code
    /// is kept and found again, so that a run after the first maps it instead of compiling
    /// it (seconds for a large component, such as a Python one). Without it, each run
    /// compiles in memory.
    #[arg(long, value_name = "DIR")]
    pub compiled_cache_dir: Option<PathBuf>,
}

/// `edgegate filter test`.
#[derive(Debug, Args)]
pub struct FilterTestArgs {
    /// The filter component.
    #[arg(value_name = "FILE.wasm")]
    pub wasm: PathBuf,

    /// Its options file (the NAME.toml the filter directory would hold).
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,

    /// A compiled-code store (as `filter compile`'s) in which the component's compiled code
    /// is kept and found again, so that a run after the first maps it instead of compiling
    /// it (seconds for a large component, such as a Python one). Without it, each run
    /// compiles in memory.
    #[arg(long, value_name = "DIR")]
    pub compiled_cache_dir: Option<PathBuf>,

    /// The component sending the request (e.g. kube-proxy).
    #[arg(long)]
    pub component: String,

    /// The resource, plural (e.g. services).
    #[arg(long)]
    pub resource: String,

    /// The verb: get, list, watch, create, update, patch, delete or deletecollection.
    #[arg(long)]
    pub verb: String,

    /// API group; empty for the core group.
    #[arg(long, default_value = "")]
    pub group: String,

    /// API version.
    #[arg(long, default_value = "v1")]
    pub version: String,

    /// Namespace of the request.
    #[arg(long)]
    pub namespace: Option<String>,

    /// The node name the filter is given.
    #[arg(long, default_value = "node")]
    pub node_name: String,

    /// The node pool the filter is given.
    #[arg(long)]
    pub node_pool: Option<String>,
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Flags of the gateway, named as YurtHub names them.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Comma-separated kube-apiserver URLs, e.g. https://10.0.0.1:6443,https://10.0.0.2:6443.
    /// Defaults to the server of the kubeconfig's current context.
    #[arg(long, value_delimiter = ',', value_name = "URLS", value_parser = parse_server)]
    pub server_addr: Vec<http::Uri>,

    /// Kubeconfig with the credentials the gateway uses for its own calls and for proxied
    /// requests that carry no Authorization header.
    #[arg(long, value_name = "PATH", env = "EDGEGATE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Name of the node this gateway runs on.
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node_name: Option<String>,

    /// Name of the node pool this node belongs to.
    #[arg(long, value_name = "NAME")]
    pub nodepool_name: Option<String>,

    /// Address of the hub server (/v1/healthz, /v1/readyz, /metrics).
    #[arg(long, default_value = "127.0.0.1", value_name = "IP", global = true)]
    pub bind_address: IpAddr,

    /// Port of the hub server.
    #[arg(long, default_value_t = 10267, value_name = "PORT", global = true)]
    pub serve_port: u16,

    /// Address of the proxy listener.
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    pub bind_proxy_address: IpAddr,

    /// Port of the plain-HTTP proxy.
    #[arg(long, default_value_t = 10261, value_name = "PORT")]
    pub proxy_port: u16,

    /// Port of the HTTPS proxy (YurtHub's secure port): in-cluster pods reach the apiserver
    /// here once masterservice points `default/kubernetes` at it. Served with
    /// --tls-cert-file and --tls-private-key-file, else with the certificate manager's
    /// serving certificate (`kubernetes.io/kubelet-serving`) once it is issued.
    #[arg(long, default_value_t = 10268, value_name = "PORT")]
    pub proxy_secure_port: u16,

    /// The HTTPS proxy's certificate chain (PEM), e.g. issued by the cluster's CA for the
    /// gateway's address; without it, the certificate manager requests one.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// The HTTPS proxy's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Directory of the local cache.
    #[arg(
        long,
        default_value = "/etc/kubernetes/cache/",
        value_name = "DIR",
        global = true
    )]
    pub disk_cache_path: PathBuf,

    /// Directory of the Wasm filters (NAME.wasm, optional NAME.toml), watched for changes.
    /// edgegate's image sets it to the filters it ships, so that YurtHub's manifest, which
    /// does not name it, runs them.
    #[arg(long, value_name = "DIR", env = "EDGEGATE_FILTER_DIR")]
    pub filter_dir: Option<PathBuf>,

    /// Run the filters the cluster declares for this node (ConfigMap
    /// `kube-system/edgegate-filters`): each pulled from its registry by digest, kept in
    /// `<--disk-cache-path>/_filter-images`, and reported on the Node (annotation
    /// `edgegate.io/filters`). The filter directory's filters win over declared ones of the
    /// same name.
    #[arg(long)]
    pub filter_fleet: bool,

    /// A PEM file of CAs trusted for filter registries, besides the system's.
    #[arg(long, value_name = "FILE", global = true)]
    pub filter_registry_ca: Option<PathBuf>,

    /// A Docker `config.json` of logins for filter registries (the content of a
    /// `kubernetes.io/dockerconfigjson` pull secret).
    #[arg(long, value_name = "FILE", global = true)]
    pub filter_registry_config: Option<PathBuf>,

    /// Gateway-level filter config (TOML; watched): components added or removed per
    /// filter, and filters disabled (`disabled = ["*"]` disables all).
    #[arg(long, value_name = "FILE")]
    pub filter_config: Option<PathBuf>,

    /// Components whose responses are cached, comma-separated, in addition to YurtHub's
    /// (kubelet, kube-proxy, flanneld, coredns, raven-agent-ds, yurt-tunnel-agent,
    /// yurt-lb-agent, node-servant, yurthub, edgegate), as YurtHub's `cache_agents` adds to
    /// them; `*` caches every component.
    #[arg(long, value_delimiter = ',', value_name = "COMPONENTS")]
    pub cache_agents: Vec<String>,

    /// A component's cache is removed once it has not been used for this long (e.g. `7d`, `12h`).
    #[arg(long, default_value = "7d", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub cache_gc_after: std::time::Duration,

    /// How requests are spread over several --server-addr.
    #[arg(long, value_enum, default_value_t = LbMode::Rr)]
    pub lb_mode: LbMode,

    /// Seconds between two health probes of each apiserver.
    #[arg(long, default_value_t = 10, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub heartbeat_interval_seconds: u64,

    /// Seconds a health probe may take before it counts as failed.
    #[arg(long, default_value_t = 2, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub heartbeat_timeout_seconds: u64,

    /// Consecutive failed probes after which a server counts as unhealthy.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub heartbeat_failed_retry: u32,

    /// Consecutive good probes after which an unhealthy server counts as healthy again.
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub heartbeat_healthy_threshold: u32,

    /// Seconds a proxied request may wait for its response to begin; watches and streams are
    /// not limited once they have begun.
    #[arg(long, default_value_t = 60, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_seconds: u64,

    /// Speak HTTP/2 to the apiservers that offer it by ALPN (kube-apiserver does): an
    /// identity's requests to a server share one connection. Upgrades (exec, attach,
    /// port-forward) stay on HTTP/1.1. Off: a connection per request in flight, as YurtHub.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set,
          env = "EDGEGATE_UPSTREAM_HTTP2")]
    pub upstream_http2: bool,

    /// Seconds the gateway waits for in-flight requests when asked to stop.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub shutdown_grace_seconds: u64,

    /// Log filter in `RUST_LOG` syntax, e.g. `info` or `edgegate=debug` [default: info, or
    /// what --v stands for].
    #[arg(long, env = "RUST_LOG", value_name = "FILTER")]
    pub log_level: Option<String>,

    /// Log output format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// YurtHub's other flags.
    #[command(flatten)]
    pub yurthub: YurtHubArgs,
}

impl RunArgs {
    /// The log filter: --log-level (or `RUST_LOG`), else what --v stands for, else `info`.
    pub fn log_filter(&self) -> &str {
        self.log_level
            .as_deref()
            .or(self.yurthub.log_level())
            .unwrap_or("info")
    }
}

/// Accepts an absolute http or https URL with a host and nothing after the authority but `/`.
fn parse_server(value: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = value
        .trim()
        .parse()
        .map_err(|e| format!("not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("https" | "http") => {}
        _ => return Err("the URL must start with https:// or http://".into()),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err("the URL has no host".into());
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err("the URL must not carry a path or query".into());
    }
    Ok(uri)
}

#[cfg(test)]
mod tests;

/// How requests are spread over several servers (`--lb-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LbMode {
    /// Round-robin over the healthy servers.
    Rr,
    /// The first healthy server, in the order given.
    Priority,
}
