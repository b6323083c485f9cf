//! A whole run: for each upstream (the static one, then kube-apiserver), start the proxies,
//! drive every workload against the four targets in turn, and take the one-off
//! measurements; everything in one run on one machine, so the ratios compare like with like.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use edgegate_testkit::process::{Process, free_port, wait_until};

use super::apiserver::ApiServer;
use super::measure::{WatchRow, WrkRow, spent, watch_client};
use super::probes::{self, Growth, Reloads};
use super::targets::{Binaries, Target, Upstream};
use super::workload::{run_wrk, workloads};

/// What a run does.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The binaries.
    pub bins: Binaries,
    /// Seconds each wrk workload and the watch run last.
    pub seconds: u64,
    /// Watches of the fan-out.
    pub watchers: usize,
    /// Events per second each watch of the static upstream gets.
    pub events_per_second: u32,
    /// Hot reload trials.
    pub reload_trials: usize,
    /// Whether to run against kube-apiserver too.
    pub apiserver: bool,
    /// Scratch space.
    pub scratch: PathBuf,
}

/// The EndpointSlice API both upstreams serve (kube-apiserver 1.20 has no v1).
pub const SLICES_API: &str = "/apis/discovery.k8s.io/v1beta1";

/// What one upstream's part of the run found.
pub struct UpstreamReport {
    /// The upstream's name.
    pub upstream: String,
    /// Idle RSS of each proxy, after start.
    pub idle: Vec<(&'static str, u64)>,
    /// Idle RSS of each proxy [`IDLE_AFTER`] after the workloads (and the watch fan-out).
    pub idle_after: Vec<(&'static str, u64)>,
    /// Per workload, one row per target.
    pub workloads: Vec<(String, Vec<WrkRow>)>,
    /// The watch fan-out, one row per target (static upstream only).
    pub watch: Vec<WatchRow>,
    /// Cache commits and aborted lists of edgegate targets after the workloads.
    pub cache: Vec<(&'static str, f64, f64)>,
}

/// The whole run.
pub struct Report {
    /// The upstreams' parts.
    pub upstreams: Vec<UpstreamReport>,
    /// Peak RSS growth of a 10 000-object LIST through 3 filters and the cache: cold, warm.
    pub growth: Vec<Growth>,
    /// Hot reload times.
    pub reloads: Reloads,
}

/// Runs everything.
pub fn run(settings: &Settings) -> Result<Report> {
    let (upstream_process, upstream) = static_upstream(settings)?;
    let (part, growth, reloads) = against(settings, &upstream, true)?;
    drop(upstream_process);
    let mut report = Report {
        upstreams: vec![part],
        growth,
        reloads,
    };
    if settings.apiserver {
        eprintln!("load: starting etcd and kube-apiserver, creating 11 000 EndpointSlices");
        let apiserver = ApiServer::start()?;
        let (part, _, _) = against(settings, &apiserver.upstream(), false)?;
        report.upstreams.push(part);
    }
    Ok(report)
}

/// The static upstream, on both CPUs (it serves the load and the proxy alike).
fn static_upstream(settings: &Settings) -> Result<(Process, Upstream)> {
    let port = free_port()?;
    let exe = std::env::current_exe()?;
    let args = vec![
        "-c".to_owned(),
        "0,1".to_owned(),
        exe.display().to_string(),
        "static-upstream".to_owned(),
        format!("--port={port}"),
        format!("--events-per-second={}", settings.events_per_second),
    ];
    let log = settings.scratch.join("static-upstream.log");
    let process = Process::spawn(
        "static upstream",
        Path::new("/usr/bin/taskset"),
        &args,
        &log,
    )?;
    wait_until(Duration::from_secs(60), "the static upstream", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })?;
    let upstream = Upstream {
        name: "static upstream".to_owned(),
        url: format!("http://127.0.0.1:{port}"),
        kubeconfig: None,
        ca: None,
        token: None,
    };
    Ok((process, upstream))
}

/// How long the proxies are left idle after the workloads before their RSS is read.
const IDLE_AFTER: Duration = Duration::from_secs(10);

/// The resident memory of each target that is a process of its own, by its name.
fn idle_rss(targets: &[Target]) -> Result<Vec<(&'static str, u64)>> {
    let mut idle = Vec::new();
    for target in targets {
        if let Some(rss) = probes::idle_rss(target)? {
            idle.push((target.name, rss));
        }
    }
    Ok(idle)
}

/// The four targets on `upstream`, every workload against each; with `probes`, also the
/// watch fan-out, the LIST memory growth and hot reload (on edgegate with filters).
fn against(
    settings: &Settings,
    upstream: &Upstream,
    probes: bool,
) -> Result<(UpstreamReport, Vec<Growth>, Reloads)> {
    let scratch = settings.scratch.join(upstream.name.replace(' ', "-"));
    eprintln!("load: {}: starting the proxies", upstream.name);
    let targets = [
        Target::direct(upstream),
        Target::edgegate(&settings.bins, upstream, false, &scratch)?,
        Target::edgegate(&settings.bins, upstream, true, &scratch)?,
        Target::go(&settings.bins, upstream, &scratch)?,
    ];
    std::thread::sleep(Duration::from_secs(3));
    let mut part = UpstreamReport {
        upstream: upstream.name.clone(),
        idle: Vec::new(),
        idle_after: Vec::new(),
        workloads: Vec::new(),
        watch: Vec::new(),
        cache: Vec::new(),
    };
    part.idle = idle_rss(&targets)?;
    let filtered = &targets[2];
    let mut growth = Vec::new();
    if probes {
        // Cold (first list: pools and the store's pages fill), then warm.
        for _ in 0..2 {
            growth.push(probes::list_growth(filtered, SLICES_API)?);
        }
    }
    for workload in workloads(SLICES_API) {
        let mut rows = Vec::new();
        for target in &targets {
            eprintln!(
                "load: {}: {} → {}",
                upstream.name, workload.name, target.name
            );
            let token = upstream.token.as_deref();
            let (wrk, spent) = spent(target, || {
                run_wrk(&target.url, &workload, settings.seconds, token)
            })?;
            rows.push(WrkRow {
                target: target.name,
                wrk,
                spent,
                seconds: settings.seconds,
            });
        }
        part.workloads.push((workload.name.to_owned(), rows));
    }
    if probes {
        for target in &targets {
            eprintln!("load: {}: watch fan-out → {}", upstream.name, target.name);
            part.watch
                .push(watch_client(target, settings.watchers, settings.seconds)?);
        }
    }
    std::thread::sleep(IDLE_AFTER);
    part.idle_after = idle_rss(&targets)?;
    for target in targets.iter().filter(|t| t.hub.is_some()) {
        part.cache.push((
            target.name,
            target.metric("edgegate_cache_commits_total")?,
            target.metric("edgegate_cache_aborted_lists_total")?,
        ));
    }
    let reloads = if probes {
        eprintln!(
            "load: hot reload, {} trials compiling a new component and {} with a new config",
            3 * probes::COMPILE_TRIALS,
            settings.reload_trials
        );
        let tagger = settings.bins.filters.join("tagger.wasm");
        probes::hot_reload(filtered, &tagger, settings.reload_trials).context("hot reload")?
    } else {
        Reloads::default()
    };
    Ok((part, growth, reloads))
}
