//! `edgegate-load`: the side-by-side load harness (`run`, what `benches/load/run` calls), the
//! two helpers it starts as processes of their own (the static upstream and the watch fan-out
//! client), `apiserver`, which keeps the harness's kube-apiserver running for profiling by
//! hand, `gateway`, one gateway with flags of the caller's in front of it (A/B runs),
//! `node`, the gateway's CPU and memory while it serves a real node, and `traffic`
//! (with the agents it runs in the node, `traffic-agents`, and its cloud, `churn`), the
//! cloud–edge traffic of a node workload, and `soak`, that workload for an hour with the gateway's use judged for
//! upward trends.
#![allow(clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};
use edgegate_benches::load::apiserver::ApiServer;
use edgegate_benches::load::kube::Client;
use edgegate_benches::load::run::{self, Settings};
use edgegate_benches::load::targets::{Binaries, Upstream};
use edgegate_benches::load::{
    churn, gateway, node, pool, reflector, report, soak, thin_link, traffic, upstream, watch,
};

#[derive(Parser)]
#[command(about = "edgegate's side-by-side load harness")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs every workload against every target and prints the report (Markdown).
    Run {
        /// The edgegate binary (a release build).
        #[arg(long)]
        edgegate: PathBuf,
        /// The Go comparator binary.
        #[arg(long)]
        goproxy: PathBuf,
        /// The directory of built filter components.
        #[arg(long)]
        filters: PathBuf,
        /// Seconds per workload and target.
        #[arg(long, default_value_t = 8)]
        seconds: u64,
        /// Watches of the fan-out.
        #[arg(long, default_value_t = 10)]
        watchers: usize,
        /// Events per second the static upstream sends each watch.
        #[arg(long, default_value_t = 1000)]
        events_per_second: u32,
        /// Hot reload trials.
        #[arg(long, default_value_t = 20)]
        reload_trials: usize,
        /// Skip the kube-apiserver upstream.
        #[arg(long)]
        no_apiserver: bool,
        /// Where the report is written besides stdout.
        #[arg(long)]
        out: PathBuf,
    },
    /// Brings up the real node of `tests/node` behind `edgegate` with pods, Services and a
    /// change from the cloud every sample, and reports the gateway's RSS, CPU, file
    /// descriptors and threads, sampled from /proc (Markdown).
    Node {
        /// The edgegate binary (a release build).
        #[arg(long)]
        edgegate: PathBuf,
        /// Seconds to sample.
        #[arg(long, default_value_t = 600)]
        seconds: u64,
        /// Seconds between samples.
        #[arg(long, default_value_t = 10)]
        every: u64,
        /// Pods on the node.
        #[arg(long, default_value_t = 10)]
        pods: usize,
        /// Services selecting them.
        #[arg(long, default_value_t = 5)]
        services: usize,
        /// Where the report is written besides stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Brings up the real node of `tests/node` with simulated agents against a cloud of
    /// Services and EndpointSlices under churn, and reports the bytes of the edge link each
    /// way, the watches the apiserver holds for the node, its CPU and the gateway's RSS, for
    /// each mode (Markdown).
    Traffic {
        /// The edgegate binary (a release build).
        #[arg(long)]
        edgegate: PathBuf,
        /// An older build for `--mode filed`, e.g. `e766859`'s, as the traffic issue found
        /// the gateway.
        #[arg(long)]
        filed_edgegate: Option<PathBuf>,
        /// A flag for the gateway after the node's own (repeatable), e.g.
        /// `--gateway-flag=--disabled-resource-filters=servicetopology`.
        #[arg(long, allow_hyphen_values = true)]
        gateway_flag: Vec<String>,
        /// Where the node's components go (repeatable; run in the order given).
        #[arg(long, value_enum, default_values = ["direct", "edgegate", "multiplexer"])]
        mode: Vec<traffic::Mode>,
        /// The cloud and its churn.
        #[command(flatten)]
        cloud: CloudArgs,
        /// Where the report is written besides stdout.
        #[arg(long, default_value = "target/load/traffic.md")]
        out: PathBuf,
    },
    /// The node workload of `traffic` across a thin link (50 kbit/s, 300 ms RTT, 2 % loss):
    /// the time to the node's Ready and to kube-proxy's rules, the bytes, the re-lists, and
    /// a cut during a slow churn, for each mode (Markdown).
    ThinLink {
        /// The edgegate binary (a release build).
        #[arg(long)]
        edgegate: PathBuf,
        /// A flag for the gateway after the node's own (repeatable).
        #[arg(long, allow_hyphen_values = true)]
        gateway_flag: Vec<String>,
        /// Where the node's components go (repeatable; run in the order given).
        #[arg(long, value_enum, default_values = ["multiplexer", "direct"])]
        mode: Vec<traffic::Mode>,
        /// Services (and EndpointSlices) in the cloud.
        #[arg(long, default_value_t = 1000)]
        services: usize,
        /// Updates a second during the churn.
        #[arg(long, default_value_t = 1)]
        churn: u32,
        /// Seconds of churn with the link up.
        #[arg(long, default_value_t = 120)]
        seconds: u64,
        /// Seconds the link stays cut, the churn going on.
        #[arg(long, default_value_t = 60)]
        cut: u64,
        /// Seconds the join, and the catch-up after the restore, may take.
        #[arg(long, default_value_t = 1200)]
        deadline: u64,
        /// The link's rate, bits per second.
        #[arg(long, default_value_t = 50_000)]
        rate: u64,
        /// Fail unless each mode through the gateway joined, caught up after the cut, and
        /// listed nothing again.
        #[arg(long)]
        check: bool,
        /// Where the report is written besides stdout.
        #[arg(long, default_value = "target/load/thin-link.md")]
        out: PathBuf,
    },
    /// A node pool's gateways on loopback behind one counting relay (the pool's WAN link):
    /// the cloud's bytes for one node, for the pool's nodes each fed from the cloud, and for
    /// its followers fed from a leader hub; then the leader killed (Markdown).
    Pool {
        /// The edgegate binary (a release build).
        #[arg(long)]
        edgegate: PathBuf,
        /// The pool's nodes.
        #[arg(long, default_value_t = 5)]
        nodes: usize,
        /// The cloud and its churn.
        #[command(flatten)]
        cloud: CloudArgs,
        /// Where the report is written besides stdout.
        #[arg(long, default_value = "target/load/pool.md")]
        out: PathBuf,
    },
    /// The node workload of `traffic` through the gateway with the churn running the whole
    /// time; samples the gateway's RSS, CPU time, file descriptors, threads, requests in
    /// flight and tasks every 10 s into `soak.csv` and `soak.png`, and fails when one trends
    /// upward beyond its margin (report: `soak.md`).
    Soak {
        /// The edgegate binary.
        #[arg(long)]
        edgegate: PathBuf,
        /// A flag for the gateway after the node's own (repeatable).
        #[arg(long, allow_hyphen_values = true)]
        gateway_flag: Vec<String>,
        /// How the gateway serves the node: `multiplexer` (as by default) or `edgegate`
        /// (every client its own upstream watch).
        #[arg(long, value_enum, default_value = "multiplexer")]
        mode: traffic::Mode,
        /// Services (and EndpointSlices) in the cloud.
        #[arg(long, default_value_t = 1000)]
        services: usize,
        /// Updates a second, the whole run.
        #[arg(long, default_value_t = 20)]
        churn: u32,
        /// Seconds to sample.
        #[arg(long, default_value_t = 3600)]
        seconds: u64,
        /// Seconds between samples.
        #[arg(long, default_value_t = 10)]
        every: u64,
        /// The directory of the report, the CSV and the plot.
        #[arg(long, default_value = "target/soak")]
        out: PathBuf,
    },
    /// The simulated agents of `traffic`, run inside the node until killed.
    TrafficAgents {
        /// The apiserver or the gateway (`https://…` or `http://…`).
        #[arg(long)]
        server: String,
        /// The CA to trust for an https server.
        #[arg(long)]
        ca: Option<PathBuf>,
        /// A bearer token.
        #[arg(long)]
        token: Option<String>,
    },
    /// The cloud of `traffic` on a running apiserver (e.g. `apiserver`'s): creates the
    /// Services and EndpointSlices that are missing, says so on stdout, then edits them
    /// until killed.
    Churn {
        /// The apiserver (`https://…`).
        #[arg(long)]
        server: String,
        /// The CA to trust.
        #[arg(long)]
        ca: PathBuf,
        /// An admin's bearer token.
        #[arg(long)]
        token: String,
        /// Services (and EndpointSlices) to create.
        #[arg(long, default_value_t = 1000)]
        services: usize,
        /// Updates a second; 0 creates the objects and exits.
        #[arg(long, default_value_t = 20)]
        per_second: u32,
    },
    /// Serves the static upstream.
    StaticUpstream {
        /// The port on 127.0.0.1.
        #[arg(long)]
        port: u16,
        /// Events per second each watch gets.
        #[arg(long, default_value_t = 1000)]
        events_per_second: u32,
    },
    /// Starts etcd and kube-apiserver holding the harness's objects, prints how to reach
    /// them, and keeps them running until stdin closes (Ctrl-D).
    Apiserver,
    /// One edgegate (no filters, on CPU 1) with `--gateway-flag`s in front of the running
    /// apiserver of `apiserver`: the apiserver workloads through it while watches are held
    /// open; per workload its CPU per request, wrk's p50 and p99, and its connections to the
    /// apiserver (Markdown). Short, for runs of two settings in turns.
    Gateway {
        /// The edgegate binary (a release build).
        #[arg(long)]
        edgegate: PathBuf,
        /// A flag for the gateway (repeatable), e.g. `--gateway-flag=--upstream-http2`.
        #[arg(long, allow_hyphen_values = true)]
        gateway_flag: Vec<String>,
        /// The apiserver's URL, as `apiserver` prints it.
        #[arg(long)]
        server: String,
        /// The gateway's kubeconfig, as `apiserver` prints it.
        #[arg(long)]
        kubeconfig: PathBuf,
        /// The bearer token of the load's requests, as `apiserver` prints it.
        #[arg(long)]
        token: String,
        /// The apiserver's process id, as `apiserver` prints it: its CPU per request too.
        #[arg(long)]
        apiserver_pid: Option<u32>,
        /// Seconds per workload.
        #[arg(long, default_value_t = 8)]
        seconds: u64,
        /// Watches held open through the gateway meanwhile.
        #[arg(long, default_value_t = 20)]
        watches: usize,
        /// How many of the four apiserver workloads run, in order (small GET at 16
        /// connections and at 1, LIST 1 000, LIST 10 000).
        #[arg(long, default_value_t = 3)]
        workloads: usize,
    },
    /// Measures watch event delivery delays through `authority`; prints a JSON summary.
    WatchClient {
        /// host:port of the target.
        #[arg(long)]
        authority: String,
        /// Watches to open.
        #[arg(long)]
        watchers: usize,
        /// Seconds to measure (after one of warm-up).
        #[arg(long)]
        seconds: u64,
    },
}

fn main() -> Result<()> {
    match Args::parse().command {
        Command::Run {
            edgegate,
            goproxy,
            filters,
            seconds,
            watchers,
            events_per_second,
            reload_trials,
            no_apiserver,
            out,
        } => {
            std::fs::create_dir_all(&out)?;
            let scratch = tempfile::Builder::new()
                .prefix("edgegate-load-")
                .tempdir()?;
            let settings = Settings {
                bins: Binaries {
                    edgegate,
                    goproxy,
                    filters,
                    gateway_flags: Vec::new(),
                },
                seconds,
                watchers,
                events_per_second,
                reload_trials,
                apiserver: !no_apiserver,
                scratch: scratch.path().to_owned(),
            };
            let report = run::run(&settings)?;
            let text = report::markdown(&report, &settings);
            std::fs::write(out.join("report.md"), &text)?;
            print!("{text}");
            Ok(())
        }
        Command::Node {
            edgegate,
            seconds,
            every,
            pods,
            services,
            out,
        } => {
            let settings = node::Settings {
                edgegate,
                duration: Duration::from_secs(seconds),
                every: Duration::from_secs(every.max(1)),
                pods,
                services,
            };
            let text = node::markdown(&node::run(&settings)?);
            if let Some(out) = out {
                std::fs::write(out, &text)?;
            }
            print!("{text}");
            Ok(())
        }
        Command::Traffic {
            edgegate,
            filed_edgegate,
            gateway_flag,
            mode,
            cloud:
                CloudArgs {
                    services,
                    churn,
                    warm_up,
                    seconds,
                },
            out,
        } => {
            anyhow::ensure!(
                filed_edgegate.is_some() || !mode.contains(&traffic::Mode::Filed),
                "--mode filed runs the build --filed-edgegate names"
            );
            let settings = traffic::Settings {
                edgegate,
                filed_edgegate,
                gateway_flags: gateway_flag,
                modes: mode,
                services,
                churn,
                warm_up: Duration::from_secs(warm_up),
                duration: Duration::from_secs(seconds),
            };
            let text = traffic::markdown(&settings, &traffic::run(&settings)?);
            write_report(&out, &text)
        }
        Command::ThinLink {
            edgegate,
            gateway_flag,
            mode,
            services,
            churn,
            seconds,
            cut,
            deadline,
            rate,
            check,
            out,
        } => {
            let settings = thin_link::Settings {
                edgegate,
                gateway_flags: gateway_flag,
                modes: mode,
                services,
                churn,
                churn_time: Duration::from_secs(seconds),
                cut: Duration::from_secs(cut),
                deadline: Duration::from_secs(deadline),
                wan: edgegate_testkit::wan::Wan {
                    rate,
                    ..thin_link::thin_wan()
                },
            };
            let figures = thin_link::run(&settings)?;
            write_report(&out, &thin_link::markdown(&settings, &figures))?;
            let faults = thin_link::faults(&figures);
            anyhow::ensure!(
                !check || faults.is_empty(),
                "through the thin link: {}",
                faults.join("; ")
            );
            Ok(())
        }
        Command::Pool {
            edgegate,
            nodes,
            cloud:
                CloudArgs {
                    services,
                    churn,
                    warm_up,
                    seconds,
                },
            out,
        } => {
            let settings = pool::Settings {
                edgegate,
                nodes: nodes.max(2),
                services,
                churn,
                warm_up: Duration::from_secs(warm_up),
                duration: Duration::from_secs(seconds),
            };
            let text = pool::markdown(&settings, &pool::run(&settings)?);
            write_report(&out, &text)
        }
        Command::Soak {
            edgegate,
            gateway_flag,
            mode,
            services,
            churn,
            seconds,
            every,
            out,
        } => {
            anyhow::ensure!(
                matches!(mode, traffic::Mode::Edgegate | traffic::Mode::Multiplexer),
                "the soak measures the gateway: --mode multiplexer or edgegate"
            );
            let settings = soak::Settings {
                edgegate,
                mode,
                gateway_flags: gateway_flag,
                services,
                churn,
                duration: Duration::from_secs(seconds),
                every: Duration::from_secs(every.max(1)),
            };
            soak_run(&settings, &out)
        }
        Command::TrafficAgents { server, ca, token } => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(reflector::run(&server, ca.as_deref(), token))
        }
        Command::Churn {
            server,
            ca,
            token,
            services,
            per_second,
        } => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            let admin = Client::new(&server, Some(&ca), Some(token), "edgegate-load/churn")?;
            rt.block_on(churn::populate(&admin, services))?;
            println!("populated: {services} Services and EndpointSlices");
            if per_second == 0 {
                return Ok(());
            }
            let forever = Arc::new(AtomicBool::new(false));
            let made = rt.block_on(churn::churn(&admin, services, per_second, forever))?;
            println!("churn ended after {made} updates");
            Ok(())
        }
        Command::StaticUpstream {
            port,
            events_per_second,
        } => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(async {
                let listener =
                    tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
                let canned = Arc::new(upstream::Canned::new(events_per_second));
                upstream::serve(listener, canned).await?;
                Ok(())
            })
        }
        Command::Apiserver => {
            let apiserver = ApiServer::start()?;
            let upstream = apiserver.upstream();
            println!("url: {}", upstream.url);
            if let Some(kubeconfig) = &upstream.kubeconfig {
                println!(
                    "gateway kubeconfig (--kubeconfig): {}",
                    kubeconfig.display()
                );
            }
            if let Some(ca) = &upstream.ca {
                println!("CA: {}", ca.display());
            }
            if let Some(token) = &upstream.token {
                println!("bearer token of the load's requests: {token}");
            }
            if let Some(pid) = apiserver.cluster.apiserver_pid() {
                println!("apiserver pid: {pid}");
            }
            println!("running until stdin closes");
            std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink())?;
            Ok(())
        }
        Command::Gateway {
            edgegate,
            gateway_flag,
            server,
            kubeconfig,
            token,
            apiserver_pid,
            seconds,
            watches,
            workloads,
        } => {
            let scratch = tempfile::Builder::new()
                .prefix("edgegate-load-")
                .tempdir()?;
            let settings = gateway::Settings {
                bins: Binaries {
                    edgegate,
                    goproxy: PathBuf::new(),
                    filters: PathBuf::new(),
                    gateway_flags: gateway_flag,
                },
                upstream: Upstream {
                    name: "kube-apiserver".to_owned(),
                    url: server,
                    kubeconfig: Some(kubeconfig),
                    ca: None,
                    token: Some(token),
                },
                apiserver_pid,
                seconds,
                watches,
                workloads,
                scratch: scratch.path().to_owned(),
            };
            let rows = gateway::run(&settings)?;
            print!("{}", gateway::markdown(&settings, &rows));
            Ok(())
        }
        Command::WatchClient {
            authority,
            watchers,
            seconds,
        } => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let delays = rt.block_on(watch::measure(&authority, watchers, seconds))?;
            println!("{}", delays.summary());
            Ok(())
        }
    }
}

/// Runs the soak, writes its report, CSV and plot into `out`, and fails on an upward trend
/// or a fault of the agents.
fn soak_run(settings: &soak::Settings, out: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(out)?;
    let report = soak::run(settings)?;
    std::fs::write(out.join("soak.csv"), soak::csv(&report.samples))?;
    let run = report.samples.last().map_or(0.0, |s| s.at.as_secs_f64());
    let judged: Vec<_> = soak::series(&report.samples)
        .into_iter()
        .map(|s| {
            let trend = soak::trend::judge(&s, run);
            (s, trend)
        })
        .collect();
    let text = soak::markdown(&report, &judged);
    std::fs::write(out.join("soak.md"), &text)?;
    print!("{text}");
    let title = format!(
        "edgegate soak: {} Services, {} updates/s, {run:.0} s",
        settings.services, settings.churn
    );
    let png = out.join("soak.png");
    if let Err(error) = soak::plot::png(&png, &title, &judged) {
        eprintln!("edgegate-load soak: no plot: {error:#}");
    }
    let mut faults: Vec<String> = judged
        .iter()
        .filter_map(|(s, trend)| match trend {
            None => Some(format!("{}: too few samples to judge", s.name)),
            Some(t) if !t.holds() => Some(format!(
                "{} trends upward: {:+.2} {} over the run, {:.2} allowed",
                s.name, t.growth, s.unit, t.allowed
            )),
            Some(_) => None,
        })
        .collect();
    faults.extend(soak::agents_faults(&report.agents));
    anyhow::ensure!(
        faults.is_empty(),
        "the soak failed: {} (see {})",
        faults.join("; "),
        out.display()
    );
    eprintln!("edgegate-load soak: no upward trend; {}", out.display());
    Ok(())
}

/// The cloud of `traffic` and `pool`: its Services and EndpointSlices, and their churn.
#[derive(clap::Args)]
struct CloudArgs {
    /// Services (and EndpointSlices) in the cloud.
    #[arg(long, default_value_t = 1000)]
    services: usize,
    /// Updates a second during the churn.
    #[arg(long, default_value_t = 20)]
    churn: u32,
    /// Seconds of warm-up (initial lists, no churn).
    #[arg(long, default_value_t = 30)]
    warm_up: u64,
    /// Seconds of churn measured.
    #[arg(long, default_value_t = 120)]
    seconds: u64,
}

/// Writes a report to `out` (making its directory) and prints it.
fn write_report(out: &std::path::Path, text: &str) -> Result<()> {
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(out, text)?;
    print!("{text}");
    Ok(())
}
