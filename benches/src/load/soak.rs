//! `edgegate-load soak`: the node workload of `traffic` (the real node, the simulated agents,
//! the cloud's Services and EndpointSlices) through the gateway with the churn running the
//! whole time, the gateway sampled every 10 s — RSS, CPU time, file descriptors, threads,
//! the requests it is serving (`edgegate_in_flight_requests`: every watch held counts) and
//! the tasks alive in its runtime (`edgegate_runtime_alive_tasks`) — into a CSV and a PNG,
//! and judged: no series may trend upward beyond its margin ([`trend`]).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use edgegate_testkit::Toolchain;

use super::node::metric_sum;
use super::reflector::counter;
use super::traffic::{Mode, NodeLoad};
use crate::proc;

pub mod plot;
pub mod trend;

use trend::{Margin, Series, Trend};

/// What a run does.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The edgegate binary.
    pub edgegate: PathBuf,
    /// How the gateway serves the node: with its multiplexer (as by default) or without.
    pub mode: Mode,
    /// Flags for the gateway after the node's own.
    pub gateway_flags: Vec<String>,
    /// Services (and EndpointSlices) in the cloud.
    pub services: usize,
    /// Updates a second, from the start to the end.
    pub churn: u32,
    /// How long the gateway is sampled.
    pub duration: Duration,
    /// Time between samples.
    pub every: Duration,
}

/// The gateway at one moment.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Time since the first sample.
    pub at: Duration,
    /// Resident memory, bytes.
    pub rss: u64,
    /// Of it, anonymous (heap, stacks, wasm memories): where a leak grows.
    pub rss_anon: u64,
    /// Of it, file-backed: the binary's code and data, read in again as it first runs after
    /// the start-up's page-out, up to the size of the files mapped.
    pub rss_file: u64,
    /// CPU time used since it started (utime + stime).
    pub cpu: Duration,
    /// The cloud's apiserver's CPU time since it started: the yardstick the gateway's is
    /// read against.
    pub apiserver_cpu: Duration,
    /// Open file descriptors.
    pub fds: usize,
    /// Threads.
    pub threads: u64,
    /// Requests it is serving (watches included).
    pub in_flight: f64,
    /// Tasks alive in its runtime.
    pub tasks: f64,
}

/// A whole run.
#[derive(Debug)]
pub struct Report {
    /// What was run.
    pub settings: Settings,
    /// From the start to the first sample: the test bed, the cloud's objects, the node's
    /// components and the agents.
    pub setup: Duration,
    /// The samples, in order.
    pub samples: Vec<Sample>,
    /// Updates the churn made.
    pub updates: u64,
    /// The agents' counters at half time and at the end.
    pub agents: (String, String),
}

/// Brings up the node workload through the gateway, churns and samples for
/// `settings.duration`, and tears everything down.
pub fn run(settings: &Settings) -> Result<Report> {
    let begun = Instant::now();
    let tools = Toolchain::provision()?;
    let say = |what: &str| eprintln!("edgegate-load soak: {what}");
    let mut load = NodeLoad::prepare(
        &tools,
        &settings.edgegate,
        settings.services,
        settings.mode,
        &edgegate_testkit::netns::LinkKind::Lan,
        &say,
    )?;
    load.start(&settings.gateway_flags, None)?;
    let pid = load
        .bed
        .node
        .pid("edgegate")
        .context("the gateway is not running")?;
    let apiserver = load.apiserver_pid()?;
    let churning = load.churn(settings.services, settings.churn);
    let setup = begun.elapsed();
    say(&format!(
        "set up in {setup:.0?}; {} updates/s, sampling every {:?} for {:?}…",
        settings.churn, settings.every, settings.duration
    ));
    let started = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut half_time = None;
    loop {
        let due = settings.every * samples.len() as u32;
        if due > settings.duration {
            break;
        }
        std::thread::sleep((started + due).saturating_duration_since(Instant::now()));
        load.check_running()?;
        anyhow::ensure!(!churning.is_finished(), "the churn stopped early");
        // A restart would start the series again and hide a leak.
        anyhow::ensure!(
            load.bed.node.pid("edgegate") == Some(pid),
            "the gateway restarted"
        );
        samples.push(sample(&load, (pid, apiserver), started.elapsed())?);
        if half_time.is_none() && due >= settings.duration / 2 {
            half_time = Some(load.agents_counters());
        }
    }
    let updates = churning.finish(&load.rt)?;
    let end = load.agents_counters();
    load.stop_agents();
    Ok(Report {
        settings: settings.clone(),
        setup,
        samples,
        updates,
        agents: (half_time.unwrap_or_default(), end),
    })
}

fn sample(load: &NodeLoad, (pid, apiserver): (u32, u32), at: Duration) -> Result<Sample> {
    let (status, metrics) = load.bed.node.hub("/metrics")?;
    anyhow::ensure!(status == 200, "/metrics answered {status}");
    let (rss_anon, rss_file) = proc::rss_split(pid)?;
    Ok(Sample {
        at,
        rss: proc::rss(pid)?,
        rss_anon,
        rss_file,
        cpu: proc::cpu_time(pid)?,
        apiserver_cpu: proc::cpu_time(apiserver)?,
        fds: proc::open_fds(pid)?,
        threads: proc::status_value(pid, "Threads:")?,
        in_flight: metric_sum(&metrics, "edgegate_in_flight_requests"),
        tasks: metric_sum(&metrics, "edgegate_runtime_alive_tasks"),
    })
}

/// The series the verdict judges, with their margins.
pub fn series(samples: &[Sample]) -> Vec<Series> {
    let at = |s: &Sample| s.at.as_secs_f64();
    let of = |f: &dyn Fn(&Sample) -> f64| samples.iter().map(|s| (at(s), f(s))).collect();
    // The gateway's CPU time against the apiserver's over the last three intervals (30 s),
    // so that one busy interval does not make a trend. The apiserver serves the same churn
    // and the same clients' lists and watches (through the gateway), so a slower spell of
    // the machine or a round of re-lists moves both; a gateway that spends more on the same
    // work moves only its own.
    let cpu = (1..samples.len())
        .filter_map(|i| {
            let (a, b) = (&samples[i.saturating_sub(3)], &samples[i]);
            let yardstick = (b.apiserver_cpu - a.apiserver_cpu).as_secs_f64();
            (yardstick > 0.0).then(|| (at(b), 100.0 * (b.cpu - a.cpu).as_secs_f64() / yardstick))
        })
        .collect();
    vec![
        // A leak is anonymous memory. The file-backed pages come and go with the code that
        // runs: the kernel reads back, on its first touch, the code the start-up's page-out
        // gave back, so they step up when a path first runs (+0.4 MiB 290 s in, about when
        // the clients' first watches time out and come back), up to the files' sizes.
        // Anonymous memory stepped then too (0.3 MiB, +0.70 predicted over a 6-minute
        // run): 1.5 MiB is that noise floor, the hour's 10 MiB the promise.
        Series {
            name: "RSS, anonymous",
            unit: "MiB",
            margin: Margin {
                absolute: 1.5,
                per_hour: 10.0,
                fraction: 0.05,
            },
            points: of(&|s| mib(s.rss_anon)),
        },
        // A file mapped again and again (filters' compiled code at every reload) would grow
        // past this; code read back stays well under it.
        Series {
            name: "RSS, file-backed",
            unit: "MiB",
            margin: Margin::absolute(8.0),
            points: of(&|s| mib(s.rss_file)),
        },
        Series {
            name: "CPU",
            unit: "% of the apiserver's, 30 s",
            // Half its median: a task spinning, or work per event growing with the events
            // seen, doubles it within minutes; the steps of a short run (the clients' watches
            // timing out and coming back, 5 minutes in) stay under it.
            margin: Margin {
                absolute: 0.0,
                per_hour: 0.0,
                fraction: 0.5,
            },
            points: cpu,
        },
        Series {
            name: "file descriptors",
            unit: "open",
            margin: Margin::absolute(8.0),
            points: of(&|s| s.fds as f64),
        },
        Series {
            name: "threads",
            unit: "count",
            margin: Margin::absolute(4.0),
            points: of(&|s| s.threads as f64),
        },
        Series {
            name: "requests in flight",
            unit: "watches included",
            margin: Margin::absolute(4.0),
            points: of(&|s| s.in_flight),
        },
        Series {
            name: "tasks",
            unit: "alive in its runtime",
            margin: Margin::absolute(16.0),
            points: of(&|s| s.tasks),
        },
    ]
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The samples as CSV: seconds, RSS bytes (all, anonymous, file-backed), CPU seconds, the
/// apiserver's CPU seconds, fds, threads, requests in flight, tasks.
pub fn csv(samples: &[Sample]) -> String {
    let mut out = "t_s,rss_bytes,rss_anon_bytes,rss_file_bytes,cpu_s,apiserver_cpu_s,fds,threads,in_flight,tasks\n".to_owned();
    for s in samples {
        let _ = writeln!(
            out,
            "{:.1},{},{},{},{:.2},{:.2},{},{},{},{}",
            s.at.as_secs_f64(),
            s.rss,
            s.rss_anon,
            s.rss_file,
            s.cpu.as_secs_f64(),
            s.apiserver_cpu.as_secs_f64(),
            s.fds,
            s.threads,
            s.in_flight,
            s.tasks
        );
    }
    out
}

/// What went wrong with the agents in the second half: no event read (their watches
/// stalled) or failed requests.
pub fn agents_faults((half, end): &(String, String)) -> Vec<String> {
    let delta = |name| Some(counter(end, name)?.saturating_sub(counter(half, name)?));
    let mut faults = Vec::new();
    match delta("events") {
        None => faults.push(format!(
            "no agents' counters (half time: {half:?}, end: {end:?})"
        )),
        Some(0) => faults.push("the agents read no event in the second half".to_owned()),
        Some(_) => {}
    }
    if let Some(errors @ 1..) = delta("errors") {
        faults.push(format!(
            "the agents' requests failed {errors} times in the second half"
        ));
    }
    faults
}

/// The report in Markdown: the settings, a row per series with its verdict, the agents.
pub fn markdown(report: &Report, judged: &[(Series, Option<Trend>)]) -> String {
    let s = &report.settings;
    let run = report.samples.last().map_or(0.0, |x| x.at.as_secs_f64());
    let mut out = format!(
        "## Soak: edgegate serving the node workload\n\n\
         {n} Services and {n} EndpointSlices, kubelet, kube-proxy and five simulated agents \
         through the gateway; {churn} updates/s ({updates} made) for {run:.0} s, sampled every \
         {every:?}, after a setup of {setup:.0?}; edgegate `{bin}`.\n\n\
         A series fails when its resistant slope (Tukey: medians of the first and last third) \
         from its second half (from {settled:.0} s \
         at the earliest: the multiplexer's 3 minutes of changes filling), extrapolated over \
         the run ({run:.0} s), exceeds the growth allowed.\n\n\
         | series | start | end | max | slope (/h) | growth over the run | allowed | |\n\
         |---|---|---|---|---|---|---|---|\n",
        n = s.services,
        settled = trend::SETTLED_AFTER,
        churn = s.churn,
        updates = report.updates,
        every = s.every,
        setup = report.setup,
        bin = [s.edgegate.display().to_string()]
            .into_iter()
            .chain(s.gateway_flags.iter().cloned())
            .collect::<Vec<_>>()
            .join(" "),
    );
    for (series, trend) in judged {
        let name = format!("{} ({})", series.name, series.unit);
        let _ = match trend {
            Some(t) => writeln!(
                out,
                "| {name} | {:.1} | {:.1} | {:.1} | {:+.2} | {:+.2} | {:.2} | {} |",
                t.start,
                t.end,
                t.max,
                t.slope_per_hour,
                t.growth,
                t.allowed,
                if t.holds() { "ok" } else { "**FAILS**" }
            ),
            None => writeln!(out, "| {name} | | | | | | | too few samples |"),
        };
    }
    let _ = writeln!(
        out,
        "\nThe agents at half time: {}; at the end: {}.",
        report.agents.0, report.agents.1
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_agents_counters_and_finds_stalls_and_errors() {
        let line = |events, errors| {
            format!(
                "lists=30 (protobuf 10, gzip 30) relists=2 watches=40 events={events} errors={errors}"
            )
        };
        assert_eq!(counter(&line(7, 0), "lists"), Some(30));
        assert_eq!(counter(&line(7, 0), "relists"), Some(2));
        assert!(agents_faults(&(line(100, 1), line(250, 1))).is_empty());
        let stalled = agents_faults(&(line(100, 1), line(100, 3)));
        assert_eq!(stalled.len(), 2, "{stalled:?}");
        assert_eq!(agents_faults(&(String::new(), line(1, 0))).len(), 1);
    }

    #[test]
    fn cpu_is_the_use_against_the_apiserver_over_the_last_three_intervals() {
        let sample = |secs: u64, cpu_ms: u64| Sample {
            at: Duration::from_secs(secs),
            rss: 3 << 20,
            rss_anon: 1 << 20,
            rss_file: 2 << 20,
            cpu: Duration::from_millis(cpu_ms),
            apiserver_cpu: Duration::from_millis(4 * cpu_ms),
            fds: 10,
            threads: 4,
            in_flight: 30.0,
            tasks: 90.0,
        };
        let samples: Vec<Sample> = (0..5).map(|i| sample(10 * i, 1000 * i)).collect();
        let all = series(&samples);
        assert_eq!(all[0].points[0], (0.0, 1.0), "anonymous");
        assert_eq!(all[1].points[0], (0.0, 2.0), "file-backed");
        // 1 s of CPU every 10 s against the apiserver's 4 s: 25 %.
        assert_eq!(all[2].points.len(), 4);
        assert!(all[2].points.iter().all(|(_, v)| (v - 25.0).abs() < 1e-9));
        // An apiserver that used nothing gives no point rather than an infinite one.
        let idle = [
            sample(0, 0),
            Sample {
                apiserver_cpu: Duration::ZERO,
                ..sample(10, 1000)
            },
        ];
        assert!(series(&idle)[2].points.is_empty());
        assert!(csv(&samples).starts_with(
            "t_s,rss_bytes,rss_anon_bytes,rss_file_bytes,cpu_s,apiserver_cpu_s,fds,threads,in_flight,tasks\n\
             0.0,3145728,1048576,2097152,0.00,0.00,10,4,30,90\n"
        ));
    }
}
