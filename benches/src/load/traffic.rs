//! `edgegate-load traffic`: the cloud–edge traffic of a node workload. The real node of
//! `tests/node` (kubelet, kube-proxy) plus the simulated agents of [`super::reflector`]
//! against a cloud of N Services and EndpointSlices under a steady churn ([`super::churn`]),
//! with every component straight to the cloud (`direct`) or through the gateway
//! (`edgegate`). Counted: the bytes of the edge link each way (the host end of the node's
//! veth), the watches the apiserver holds for the node, its CPU time, the gateway's RSS.
//!
//! A run per mode: the test bed comes up, the cloud is populated, the node's components are
//! stopped and the baseline read (the apiserver then holds only kube-controller-manager's
//! watches), then they start again with the agents — the warm-up (their initial lists, no
//! churn) — and then the churn runs for the measured time.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use edgegate_testkit::Toolchain;
use edgegate_testkit::netns::LinkKind;

pub use bed::{Churn, NodeLoad};
pub use report::markdown;

mod bed;
mod report;
use super::kube::{self, Client};
use crate::proc;

/// Where the node's components send their requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Straight to the cloud's apiserver (protobuf, gzip), as without a hub.
    Direct,
    /// Through the build of `--filed-edgegate` with its own defaults and the same filters:
    /// the gateway as the traffic issue found it (`e766859`: every client its own upstream
    /// list and watch, every framed response asked for as uncompressed JSON).
    Filed,
    /// Through the gateway, with YurtHub's filters as the node tests run them, every client
    /// its own upstream list and watch (`--pool-scope-resources=`).
    Edgegate,
    /// The same with the node-level multiplexer, as the gateway runs by default: one
    /// upstream list and watch of Services and of EndpointSlices for the whole node
    /// (`discovery.k8s.io/v1beta1`, what the test bed's 1.20 cluster serves and its
    /// kube-proxy asks for).
    Multiplexer,
}

impl Mode {
    /// The gateway flags the mode sets, before the run's own.
    pub(crate) fn gateway_flags(self) -> &'static [&'static str] {
        match self {
            Mode::Direct | Mode::Filed => &[],
            Mode::Edgegate => &["--pool-scope-resources="],
            Mode::Multiplexer => {
                &["--pool-scope-resources=/v1/services,discovery.k8s.io/v1beta1/endpointslices"]
            }
        }
    }
}

/// What a run does.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The edgegate binary.
    pub edgegate: PathBuf,
    /// The older build [`Mode::Filed`] runs.
    pub filed_edgegate: Option<PathBuf>,
    /// Flags for the gateway after the node's own.
    pub gateway_flags: Vec<String>,
    /// The modes, run one after the other.
    pub modes: Vec<Mode>,
    /// Services (and EndpointSlices) in the cloud.
    pub services: usize,
    /// Updates a second during the churn.
    pub churn: u32,
    /// The warm-up: the components' initial lists, no churn.
    pub warm_up: Duration,
    /// The churn's measured time.
    pub duration: Duration,
}

/// Counters read at one moment.
#[derive(Clone, Copy, Debug, Default)]
struct Reading {
    /// Bytes the node sent to the cloud (received by the host end).
    up: u64,
    /// Bytes the cloud sent to the node.
    down: u64,
    /// The apiserver's CPU time.
    cpu: Duration,
    /// Watches the apiserver serves (`apiserver_longrunning_gauge{verb="WATCH"}`).
    watches: f64,
}

/// One mode's figures.
#[derive(Clone, Debug)]
pub struct Figures {
    /// The mode.
    pub mode: Mode,
    /// Node → cloud and cloud → node bytes during the warm-up.
    pub warm_up: (u64, u64),
    /// The same during the churn.
    pub churn: (u64, u64),
    /// The apiserver's CPU seconds during the warm-up and the churn.
    pub apiserver_cpu: (f64, f64),
    /// Watches the apiserver held for the node (over the baseline): end of warm-up, end of
    /// churn, most seen.
    pub watches: (f64, f64, f64),
    /// The baseline: watches the apiserver held with the node's components stopped.
    pub baseline_watches: f64,
    /// Updates the churn made, and over how long.
    pub updates: (u64, Duration),
    /// The gateway's RSS at the end of the warm-up (its clients listed and watching, no
    /// churn), at the end and its peak, bytes (through the gateway).
    pub gateway_rss: Option<(u64, u64, u64)>,
    /// The gateway's anonymous and file-backed resident bytes at the end of the warm-up
    /// (`RssAnon`, `RssFile`): its heap and the code it maps.
    pub gateway_rss_split: Option<(u64, u64)>,
    /// The same at the end of the churn, and the most file-backed bytes of any sample in it.
    pub gateway_rss_churn: Option<(u64, u64, u64)>,
    /// What the multiplexer's shared states hold at the end: objects and their bytes
    /// (multiplexer mode).
    pub shared_state: Option<(f64, f64)>,
    /// The agents' last counters line.
    pub agents: String,
}

/// Runs every mode of `settings`, one test bed each.
pub fn run(settings: &Settings) -> Result<Vec<Figures>> {
    each_mode(&settings.modes, |tools, mode| {
        run_mode(tools, settings, mode)
    })
}

/// `run` for each of `modes` in turn, with the node's binaries provisioned once.
pub fn each_mode<T>(modes: &[Mode], run: impl Fn(&Toolchain, Mode) -> Result<T>) -> Result<Vec<T>> {
    let tools = Toolchain::provision()?;
    modes.iter().map(|mode| run(&tools, *mode)).collect()
}

fn run_mode(tools: &Toolchain, settings: &Settings, mode: Mode) -> Result<Figures> {
    let say = |what: &str| eprintln!("edgegate-load traffic ({mode:?}): {what}");
    let mut load = NodeLoad::prepare(
        tools,
        &settings.edgegate,
        settings.services,
        mode,
        &LinkKind::Lan,
        &say,
    )?;
    std::thread::sleep(Duration::from_secs(5));
    let apiserver = load.apiserver_pid()?;
    let read = |load: &NodeLoad| -> Result<Reading> {
        let (up, down) = load.link_bytes()?;
        Ok(Reading {
            up,
            down,
            cpu: proc::cpu_time(apiserver)?,
            watches: load.rt.block_on(watch_gauge(&load.admin))?,
        })
    };
    let baseline = read(&load)?;

    say("warm-up: the components start and list…");
    load.start(&settings.gateway_flags, settings.filed_edgegate.as_deref())?;
    let mut peak = (0.0f64, 0u64);
    let mut sample = |load: &mut NodeLoad| -> Result<Reading> {
        load.check_running()?;
        let reading = read(load)?;
        peak.0 = peak.0.max(reading.watches);
        if let Some(pid) = load.bed.node.pid("edgegate") {
            peak.1 = peak.1.max(proc::rss(pid)?);
        }
        Ok(reading)
    };
    let until = Instant::now() + settings.warm_up;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_secs(5).min(until - Instant::now()));
        sample(&mut load)?;
    }
    let warm = sample(&mut load)?;
    let idle_rss = load.bed.node.pid("edgegate").map(proc::rss).transpose()?;
    let split = |load: &NodeLoad| -> Result<Option<(u64, u64)>> {
        let pid = load.bed.node.pid("edgegate");
        pid.map(|pid| -> Result<(u64, u64)> {
            Ok((
                proc::status_bytes(pid, "RssAnon:")?,
                proc::status_bytes(pid, "RssFile:")?,
            ))
        })
        .transpose()
    };
    let gateway_rss_split = split(&load)?;
    let mut file_peak = 0;

    say(&format!(
        "churn: {} updates/s for {:?}…",
        settings.churn, settings.duration
    ));
    let started = Instant::now();
    let churning = load.churn(settings.services, settings.churn);
    let until = started + settings.duration;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_secs(5).min(until - Instant::now()));
        sample(&mut load)?;
        if let Some((_, file)) = split(&load)? {
            file_peak = file.max(file_peak);
        }
        anyhow::ensure!(!churning.is_finished(), "the churn stopped early");
    }
    let made = churning.finish(&load.rt)?;
    let elapsed = started.elapsed();
    let end = sample(&mut load)?;
    let gateway_rss_churn = split(&load)?.map(|(anon, file)| (anon, file, file.max(file_peak)));
    let gateway_rss = match (idle_rss, load.bed.node.pid("edgegate")) {
        (Some(idle), Some(pid)) => Some((idle, proc::rss(pid)?, peak.1)),
        _ => None,
    };
    let shared_state = match load.bed.node.pid("edgegate") {
        Some(_) => shared_state(&load.bed.node)?,
        None => None,
    };
    load.stop_agents();
    let agents = load.agents_counters();
    // A clean shutdown, as an operator's: what the gateway does as it exits runs too.
    load.bed.node.stop_gateway();
    let secs = |a: Duration, b: Duration| (a - b).as_secs_f64();
    Ok(Figures {
        mode,
        warm_up: (warm.up - baseline.up, warm.down - baseline.down),
        churn: (end.up - warm.up, end.down - warm.down),
        apiserver_cpu: (secs(warm.cpu, baseline.cpu), secs(end.cpu, warm.cpu)),
        watches: (
            warm.watches - baseline.watches,
            end.watches - baseline.watches,
            peak.0 - baseline.watches,
        ),
        baseline_watches: baseline.watches,
        updates: (made, elapsed),
        gateway_rss,
        gateway_rss_split,
        gateway_rss_churn,
        shared_state,
        agents,
    })
}

/// The sums of `edgegate_multiplexer_objects` and `_object_bytes` on the gateway's hub, if
/// it has a multiplexer.
fn shared_state(node: &edgegate_testkit::node::Node) -> Result<Option<(f64, f64)>> {
    let (_, metrics) = node.hub("/metrics")?;
    let sum = |name: &str| -> Option<f64> {
        let values: Vec<f64> = metrics
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
            .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
            .collect();
        (!values.is_empty()).then(|| values.iter().sum())
    };
    Ok(sum("edgegate_multiplexer_objects").zip(sum("edgegate_multiplexer_object_bytes")))
}

/// Watches the apiserver serves now: the sum of `apiserver_longrunning_gauge`'s
/// `verb="WATCH"` series (kube-apiserver 1.20; `apiserver_longrunning_requests` later).
async fn watch_gauge(admin: &Client) -> Result<f64> {
    let response = admin.get("/metrics").await?;
    let text = String::from_utf8(kube::body_bytes(response).await?)?;
    Ok(watch_sum(&text))
}

fn watch_sum(text: &str) -> f64 {
    text.lines()
        .filter(|l| {
            (l.starts_with("apiserver_longrunning_gauge{")
                || l.starts_with("apiserver_longrunning_requests{"))
                && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_watch_series_of_the_longrunning_gauge_only() {
        let text = "# TYPE apiserver_longrunning_gauge gauge\n\
            apiserver_longrunning_gauge{component=\"apiserver\",resource=\"pods\",verb=\"WATCH\"} 3\n\
            apiserver_longrunning_gauge{component=\"apiserver\",resource=\"pods\",verb=\"CONNECT\"} 7\n\
            apiserver_longrunning_requests{resource=\"nodes\",verb=\"WATCH\"} 2\n\
            apiserver_registered_watchers{kind=\"Pod\"} 40\n";
        assert_eq!(watch_sum(text), 5.0);
    }
}
