//! The rest of YurtHub v1.7's flags (`cmd/yurthub/app/options`, plus klog's `--v` and
//! `--vmodule` and component-base's `--log-flush-frequency`), so that YurtHub's static pod
//! manifest starts edgegate unchanged. Some have their YurtHub meaning here; the others
//! belong to features edgegate does not have (the leader hub) or that YurtHub
//! deprecated: they are accepted and, when given,
//! named once at start by [`YurtHubArgs::warnings`] with what edgegate does instead.
//!
//! Boolean flags take Go's forms: `--flag`, `--flag=true`, `--flag=false`.

use std::time::Duration;

use clap::{Args, ValueEnum};

/// YurtHub's default name of the hub interface.
pub const DEFAULT_HUB_INTERFACE: &str = "yurthub-dummy0";

/// YurtHub's `--working-mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum WorkingMode {
    /// An edge node: cache, health checks, offline answers, every filter.
    #[default]
    Edge,
    /// A cloud node: a plain proxy, no cache, no health checker, and the filters that only
    /// make sense at the edge (discardcloudservice, forwardkubesvctraffic,
    /// serviceenvupdater) off.
    Cloud,
    /// YurtHub's proxy to a host cluster's apiservers (--host-control-plane-address):
    /// refused at start, edgegate has no local mode.
    Local,
}

/// YurtHub's default cache agents: the node components that must keep working offline.
pub const DEFAULT_CACHE_AGENTS: &[&str] = &[
    "kubelet",
    "kube-proxy",
    "flanneld",
    "coredns",
    "raven-agent-ds",
    "yurt-tunnel-agent",
    "yurt-lb-agent",
    "node-servant",
    "yurthub",
    "edgegate",
];

/// The filters YurtHub turns off in cloud mode.
pub const EDGE_ONLY_FILTERS: [&str; 3] = [
    "discardcloudservice",
    "forwardkubesvctraffic",
    "serviceenvupdater",
];

/// YurtHub v1.7 flags that `RunArgs` does not name itself.
#[derive(Debug, Args)]
pub struct YurtHubArgs {
    /// edge, cloud, or local (refused: edgegate has no local mode).
    #[arg(long, value_enum, default_value_t = WorkingMode::Edge, value_name = "MODE")]
    pub working_mode: WorkingMode,

    /// At least how long an offline watch without `timeoutSeconds` stays open: a random
    /// time between once and twice this (a Go duration, e.g. `30m` or `1800s`).
    #[arg(long, default_value = "30m", value_name = "DURATION", value_parser = parse_go_duration)]
    pub min_request_timeout: Duration,

    /// Requests served at once beyond which others get `429 Too Many Requests`; watches,
    /// logs, exec and other long-running requests do not count. 0: no limit.
    #[arg(long, default_value_t = 250, value_name = "N")]
    pub max_requests_in_flight: usize,

    /// false turns every filter off.
    #[arg(long, default_value_t = true, value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub enable_resource_filter: bool,

    /// Filters turned off, comma-separated (YurtHub's names; `-` and `_` in a file name are
    /// ignored when matching, so `discardcloudservice` names `discard-cloud-service.wasm`).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub disabled_resource_filters: Vec<String>,

    /// klog's verbosity: 0–3 log at info, 4–5 at debug, 6 and above at trace; --log-level
    /// wins when given.
    #[arg(long = "v", short = 'v', value_name = "LEVEL")]
    pub verbosity: Option<u8>,

    /// klog's per-file verbosity: accepted, not used (see --log-level).
    #[arg(long, value_name = "PATTERN=N")]
    pub vmodule: Option<String>,

    /// klog's flush interval: accepted, not used (edgegate writes each line at once).
    #[arg(long, value_name = "DURATION", value_parser = parse_go_duration)]
    pub log_flush_frequency: Option<Duration>,

    /// Namespace of YurtHub's `yurt-hub-cfg` ConfigMap: accepted, not used (edgegate follows
    /// it in kube-system).
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,

    /// The node's IP on its pool's LAN: the gateway serves its pool's followers there, on
    /// --multiplexer-port (not served without it).
    #[arg(long, value_name = "IP")]
    pub node_ip: Option<std::net::IpAddr>,

    /// Minutes between YurtHub's cache collections: accepted, not used (see --cache-gc-after).
    #[arg(long, value_name = "MINUTES")]
    pub gc_frequency: Option<u32>,

    /// How long kubelet may be silent before the node lease is no longer renewed:
    /// accepted, not used (edgegate echoes kubelet's own renewals).
    #[arg(long, value_name = "DURATION", value_parser = parse_go_duration)]
    pub kubelet_health_grace_period: Option<Duration>,

    /// The certificate manager's flags.
    #[command(flatten)]
    pub certificates: super::certificates::CertificateArgs,

    /// Make the hub interface: a dummy link (--hub-interface-name) with the address
    /// (--hub-interface-ip) where pods reach the HTTPS proxy; re-made if removed, left in
    /// place on exit. Only while the HTTPS proxy is served (it needs a serving certificate).
    #[arg(long, default_value_t = true, value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub enable_dummy_if: bool,

    /// The hub interface's address (YurtHub's --dummy-if-ip): in 169.254.0.0/16, outside
    /// 169.254.31.0/24 and not 169.254.1.1, or IPv6 [default: 169.254.2.1, or fd00::2:1 when
    /// --bind-address is IPv6].
    #[arg(long, alias = "dummy-if-ip", value_name = "IP")]
    pub hub_interface_ip: Option<std::net::IpAddr>,

    /// The hub interface's name (YurtHub's --dummy-if-name), at most 15 bytes.
    #[arg(long, alias = "dummy-if-name", default_value = DEFAULT_HUB_INTERFACE,
          value_name = "NAME")]
    pub hub_interface_name: String,

    /// iptables rules for the hub (deprecated in YurtHub): accepted, not used.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub enable_iptables: Option<bool>,

    /// pprof on the hub server: accepted, not used (edgegate has no pprof; see /metrics).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub profiling: Option<bool>,

    /// Watch NodePools for filters (deprecated in YurtHub): accepted, not used (edgegate's
    /// filters read the node's pool from its label or --nodepool-name).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub enable_node_pool: Option<bool>,

    /// Pool-level service topology: accepted, not used (see the servicetopology filter).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub enable_pool_service_topology: Option<bool>,

    /// Port where a leader hub serves its pool's followers (HTTPS on --node-ip, node client
    /// certificates of the pool only), and where a follower reaches its pool's leaders
    /// [default: 10269].
    #[arg(long, value_name = "PORT")]
    pub multiplexer_port: Option<u16>,

    /// The resources whose lists and watches the node's clients share: one upstream list and
    /// watch each, every client answered from it (`[group]/version/resource`, comma-separated;
    /// default, as YurtHub: `/v1/services,discovery.k8s.io/v1/endpointslices`; empty: none).
    /// The pool's `leader-hub-<pool>` ConfigMap, when it names `pool-scoped-metadata`, names
    /// them instead (unless this is empty).
    #[arg(long, value_delimiter = ',', value_name = "GROUP/VERSION/RESOURCE")]
    pub pool_scope_resources: Option<Vec<String>>,

    /// The host cluster's apiservers for local mode: accepted, not used (see --working-mode).
    #[arg(long, value_name = "IP:PORT")]
    pub host_control_plane_address: Option<String>,
}

impl YurtHubArgs {
    /// One line per flag given that edgegate accepts without YurtHub's meaning: what it
    /// does instead. Logged once at start.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut note = |given: bool, flags: &str, instead: &str| {
            if given {
                warnings.push(format!("{flags}: {instead}"));
            }
        };
        note(
            self.enable_node_pool.is_some() || self.enable_pool_service_topology.is_some(),
            "--enable-node-pool, --enable-pool-service-topology ignored",
            "filters read the node's pool from --nodepool-name or the node's label",
        );
        note(
            self.enable_iptables == Some(true),
            "--enable-iptables (deprecated in YurtHub) ignored",
            "edgegate sets up no iptables rules",
        );
        note(
            self.profiling == Some(true),
            "--profiling ignored",
            "edgegate serves no pprof; the hub serves /metrics",
        );
        note(
            self.namespace.is_some(),
            "--namespace ignored",
            "edgegate follows the yurt-hub-cfg ConfigMap in kube-system",
        );
        note(
            self.gc_frequency.is_some(),
            "--gc-frequency ignored",
            "a component's cache is removed after --cache-gc-after unused",
        );
        note(
            self.kubelet_health_grace_period.is_some(),
            "--kubelet-health-grace-period ignored",
            "offline, edgegate echoes kubelet's own lease renewals",
        );
        note(
            self.vmodule.is_some() || self.log_flush_frequency.is_some(),
            "--vmodule, --log-flush-frequency ignored",
            "logging is set by --log-level (or --v) and written line by line",
        );
        note(
            self.host_control_plane_address.is_some(),
            "--host-control-plane-address ignored",
            "edgegate has no local mode",
        );
        warnings
    }

    /// The `RUST_LOG` filter klog's `--v` stands for, if given.
    pub fn log_level(&self) -> Option<&'static str> {
        self.verbosity.map(|v| match v {
            0..=3 => "info",
            4..=5 => "debug",
            _ => "trace",
        })
    }
}

/// Parses a Go `time.Duration` as pflag does: `0`, or number–unit pairs (`ns`, `us`, `µs`,
/// `ms`, `s`, `m`, `h`), e.g. `1800s`, `30m0s`, `1h30m`, `1.5h`.
pub fn parse_go_duration(value: &str) -> Result<Duration, String> {
    let bad = || format!("not a Go duration (e.g. 30m, 1800s): {value:?}");
    if value == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = value;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..number_end].parse().map_err(|_| bad())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += number * seconds;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

#[cfg(test)]
mod tests;
