//! The rest of YurtHub v1.7's flags (`cmd/yurthub/app/options`, plus klog's `--v` and
//! `--vmodule` and component-base's `--log-flush-frequency`), so that YurtHub's static pod
//! manifest starts edgegate unchanged. Some have their YurtHub meaning here; the others
//! belong to features edgegate does not have (certificate manager, dummy interface,
//! multiplexer, leader hub) or that YurtHub deprecated: they are accepted and, when given,
//! named once at start by [`YurtHubArgs::warnings`] with what edgegate does instead.
//!
//! Boolean flags take Go's forms: `--flag`, `--flag=true`, `--flag=false`.

use std::time::Duration;

use clap::{Args, ValueEnum};

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

    /// Namespace of YurtHub's `yurt-hub-cfg` ConfigMap: accepted, not used (edgegate takes
    /// cache agents and filter settings from its flags and --filter-config).
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,

    /// The node's IP for the multiplexer: accepted, not used.
    #[arg(long, value_name = "IP")]
    pub node_ip: Option<String>,

    /// Minutes between YurtHub's cache collections: accepted, not used (see --cache-gc-after).
    #[arg(long, value_name = "MINUTES")]
    pub gc_frequency: Option<u32>,

    /// How long kubelet may be silent before the node lease is no longer renewed:
    /// accepted, not used (edgegate echoes kubelet's own renewals).
    #[arg(long, value_name = "DURATION", value_parser = parse_go_duration)]
    pub kubelet_health_grace_period: Option<Duration>,

    /// Certificate bootstrap mode (token, kubeletcertificate): accepted, not used; edgegate
    /// has no certificate manager and uses --kubeconfig.
    #[arg(long, value_name = "MODE")]
    pub bootstrap_mode: Option<String>,

    /// Bootstrap kubeconfig: accepted, not used (see --bootstrap-mode).
    #[arg(long, value_name = "FILE")]
    pub bootstrap_file: Option<String>,

    /// Bootstrap token (deprecated in YurtHub): accepted, not used (see --bootstrap-mode).
    #[arg(long, value_name = "TOKEN")]
    pub join_token: Option<String>,

    /// CA public key hashes for token discovery: accepted, not used (see --bootstrap-mode).
    #[arg(long, value_delimiter = ',', value_name = "TYPE:VALUE")]
    pub discovery_token_ca_cert_hash: Vec<String>,

    /// Skip CA verification in token discovery: accepted, not used (see --bootstrap-mode).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub discovery_token_unsafe_skip_ca_verification: Option<bool>,

    /// Organizations of the client certificate: accepted, not used (see --bootstrap-mode).
    #[arg(long, value_delimiter = ',', value_name = "ORGS")]
    pub hub_cert_organizations: Vec<String>,

    /// Directory of YurtHub's certificates: accepted, not used (see --bootstrap-mode).
    #[arg(long, value_name = "DIR")]
    pub root_dir: Option<String>,

    /// Dummy interface for pods: accepted, not used; the HTTPS proxy serves on
    /// --bind-proxy-address.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub enable_dummy_if: Option<bool>,

    /// The dummy interface's address: accepted, not used (see --enable-dummy-if).
    #[arg(long, value_name = "IP")]
    pub dummy_if_ip: Option<String>,

    /// The dummy interface's name: accepted, not used (see --enable-dummy-if).
    #[arg(long, value_name = "NAME")]
    pub dummy_if_name: Option<String>,

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

    /// Port of YurtHub's multiplexer: accepted, not used (edgegate has no multiplexer).
    #[arg(long, value_name = "PORT")]
    pub multiplexer_port: Option<u16>,

    /// Resources the multiplexer shares: accepted, not used (see --multiplexer-port).
    #[arg(long, value_delimiter = ',', value_name = "GROUP/VERSION/RESOURCE")]
    pub pool_scope_resources: Vec<String>,

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
        let certificates = self.bootstrap_mode.is_some()
            || self.bootstrap_file.is_some()
            || self.join_token.is_some()
            || !self.discovery_token_ca_cert_hash.is_empty()
            || self.discovery_token_unsafe_skip_ca_verification.is_some()
            || !self.hub_cert_organizations.is_empty()
            || self.root_dir.is_some();
        note(
            certificates,
            "--bootstrap-mode, --bootstrap-file, --join-token, --discovery-token-*, \
             --hub-cert-organizations, --root-dir ignored",
            "edgegate has no certificate manager; it uses the credentials of --kubeconfig \
             (or EDGEGATE_KUBECONFIG)",
        );
        note(
            self.enable_dummy_if == Some(true)
                || self.dummy_if_ip.is_some()
                || self.dummy_if_name.is_some(),
            "--enable-dummy-if, --dummy-if-ip, --dummy-if-name ignored",
            "edgegate creates no dummy interface; the HTTPS proxy serves on \
             --bind-proxy-address:--proxy-secure-port",
        );
        note(
            self.multiplexer_port.is_some()
                || !self.pool_scope_resources.is_empty()
                || self.node_ip.is_some(),
            "--multiplexer-port, --pool-scope-resources, --node-ip ignored",
            "edgegate has no multiplexer; every list and watch goes to the apiserver",
        );
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
            "edgegate does not read the yurt-hub-cfg ConfigMap; cache agents come from \
             --cache-agents, filter settings from --filter-config",
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
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    fn parse(flags: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once(&"edgegate").chain(flags))
    }

    /// Every flag of `cmd/yurthub/app/options/options.go` (v1.7) and the logging flags
    /// `globalflag.AddGlobalFlags` adds, in the forms pflag accepts.
    const EVERY_YURTHUB_FLAG: &[&str] = &[
        "--bind-address=127.0.0.1",
        "--serve-port=10267",
        "--bind-proxy-address=127.0.0.1",
        "--proxy-port=10261",
        "--proxy-secure-port=10268",
        "--multiplexer-port=10269",
        "--namespace=kube-system",
        "--server-addr=https://10.0.0.1:6443,https://10.0.0.2:6443",
        "--hub-cert-organizations=a,b",
        "--gc-frequency=120",
        "--node-name=edge-1",
        "--node-ip=10.0.0.9",
        "--lb-mode=priority",
        "--heartbeat-failed-retry=3",
        "--heartbeat-healthy-threshold=2",
        "--heartbeat-timeout-seconds=2",
        "--heartbeat-interval-seconds=10",
        "--max-requests-in-flight=250",
        "--join-token=abcdef.0123456789abcdef",
        "--bootstrap-mode=token",
        "--bootstrap-file=/var/lib/yurthub/bootstrap-hub.conf",
        "--root-dir=/var/lib/yurthub",
        "--profiling=true",
        "--enable-dummy-if=true",
        "--enable-iptables=false",
        "--dummy-if-ip=169.254.2.1",
        "--dummy-if-name=hub-dummy0",
        "--disk-cache-path=/etc/kubernetes/cache/",
        "--enable-resource-filter=true",
        "--disabled-resource-filters=servicetopology",
        "--nodepool-name=pool-a",
        "--working-mode=edge",
        "--kubelet-health-grace-period=40s",
        "--enable-node-pool=true",
        "--min-request-timeout=30m0s",
        "--discovery-token-ca-cert-hash=sha256:00ff",
        "--discovery-token-unsafe-skip-ca-verification",
        "--enable-pool-service-topology=false",
        "--host-control-plane-address=10.0.0.1:6443",
        "--pool-scope-resources=/v1/services,discovery.k8s.io/v1/endpointslices",
        "--v=2",
        "--vmodule=proxy*=4",
        "--log-flush-frequency=5s",
    ];

    #[test]
    fn every_yurthub_flag_parses() {
        let cli = parse(EVERY_YURTHUB_FLAG).unwrap();
        let y = &cli.run.yurthub;
        assert_eq!(y.working_mode, WorkingMode::Edge);
        assert_eq!(y.min_request_timeout, Duration::from_secs(1800));
        assert_eq!(y.verbosity, Some(2));
        assert_eq!(y.discovery_token_unsafe_skip_ca_verification, Some(true));
        assert_eq!(y.enable_pool_service_topology, Some(false));
        assert_eq!(y.hub_cert_organizations, ["a", "b"]);
        assert_eq!(cli.run.nodepool_name.as_deref(), Some("pool-a"));
    }

    #[test]
    fn klogs_verbosity_takes_go_forms_and_sets_the_log_level_unless_given() {
        for form in [&["-v=4"][..], &["--v=4"], &["-v", "4"], &["--v", "4"]] {
            let cli = parse(form).unwrap();
            assert_eq!(cli.run.yurthub.verbosity, Some(4), "{form:?}");
        }
        // RUST_LOG in the test's environment would stand for --log-level.
        let quiet = parse(&["--v=2", "--log-level=warn"]).unwrap();
        assert_eq!(quiet.run.log_filter(), "warn");
        let mut cli = parse(&["--v=2"]).unwrap();
        cli.run.log_level = None;
        assert_eq!(cli.run.log_filter(), "info");
        cli.run.yurthub.verbosity = Some(6);
        assert_eq!(cli.run.log_filter(), "trace");
    }

    #[test]
    fn booleans_take_gos_forms() {
        let on = parse(&["--enable-resource-filter"]).unwrap();
        assert!(on.run.yurthub.enable_resource_filter);
        let off = parse(&["--enable-resource-filter=false"]).unwrap();
        assert!(!off.run.yurthub.enable_resource_filter);
        assert!(parse(&[]).unwrap().run.yurthub.enable_resource_filter);
        assert!(parse(&["--enable-dummy-if=maybe"]).is_err());
    }

    #[test]
    fn go_durations() {
        let secs = |v| parse_go_duration(v).map(|d| d.as_secs_f64());
        assert_eq!(secs("0"), Ok(0.0));
        assert_eq!(secs("1800s"), Ok(1800.0));
        assert_eq!(secs("30m0s"), Ok(1800.0));
        assert_eq!(secs("1h30m"), Ok(5400.0));
        assert_eq!(secs("1.5h"), Ok(5400.0));
        assert_eq!(secs("250ms"), Ok(0.25));
        for bad in ["", "1800", "5d", "m", "-1s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_without_yurthubs_meaning_are_named_once_with_what_edgegate_does_instead() {
        assert!(parse(&[]).unwrap().run.yurthub.warnings().is_empty());
        let warnings = parse(EVERY_YURTHUB_FLAG).unwrap().run.yurthub.warnings();
        for flag in [
            "--bootstrap-file",
            "--enable-dummy-if",
            "--multiplexer-port",
            "--enable-node-pool",
            "--profiling",
            "--namespace",
            "--gc-frequency",
            "--kubelet-health-grace-period",
            "--vmodule",
            "--host-control-plane-address",
        ] {
            let named: Vec<_> = warnings.iter().filter(|w| w.contains(flag)).collect();
            assert_eq!(named.len(), 1, "{flag}: {warnings:#?}");
        }
        // Off is what edgegate does anyway.
        let off = parse(&["--enable-dummy-if=false", "--enable-iptables=false"]).unwrap();
        assert!(off.run.yurthub.warnings().is_empty());
    }

    #[test]
    fn working_modes() {
        for (value, mode) in [
            ("edge", WorkingMode::Edge),
            ("cloud", WorkingMode::Cloud),
            ("local", WorkingMode::Local),
        ] {
            let cli = parse(&["--working-mode", value]).unwrap();
            assert_eq!(cli.run.yurthub.working_mode, mode);
        }
        assert!(parse(&["--working-mode=fog"]).is_err());
    }
}
