//! `edgegate-load pool`: the cloud's bytes for a node pool whose gateways follow a leader
//! hub. A cluster (etcd, kube-apiserver) on the host's end of the pool's one WAN link, with
//! N Services and EndpointSlices under the churn of `traffic`; each node a network
//! namespace on the pool's LAN (a [`Lan`]: one bridge behind that link) running a gateway
//! and the simulated agents of [`super::reflector`] on its proxy. One run per layout, each
//! on a cluster and a LAN of its own: one node; the pool's nodes each fed from the cloud;
//! the pool's followers fed from a leader named in `kube-system/leader-hub-<pool>`, as
//! yurt-manager names it. Counted: the bytes that crossed the WAN link (the host end's
//! counters) during the warm-up and the churn, the apiserver's watches of Services and
//! EndpointSlices; with a leader, the leader is then killed, and the time until every
//! follower's feeds are on the cloud and the agents' failed requests are counted.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Result;
use edgegate_testkit::cluster::ClusterOptions;
use edgegate_testkit::lan::Lan;
use edgegate_testkit::netns::LinkKind;
use edgegate_testkit::pool::{
    PoolNode, leader_config_map, let_nodes_in, node_object, start_member,
};
use edgegate_testkit::process::{Process, free_port};
use edgegate_testkit::{ADMIN_TOKEN, Cluster, Etcd, Gateway, Toolchain};

use super::churn;
use super::kube::{self, Client};

/// The pool's name.
const POOL: &str = "pool-1";

/// How the pool's nodes reach the cloud.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One node alone.
    One,
    /// Every node of the pool fed from the cloud (no leader).
    Cloud,
    /// The followers fed from the pool's leader.
    Leader,
}

/// What a run does.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The edgegate binary.
    pub edgegate: PathBuf,
    /// The pool's nodes.
    pub nodes: usize,
    /// Services (and EndpointSlices) in the cloud.
    pub services: usize,
    /// Updates a second during the churn.
    pub churn: u32,
    /// The warm-up: the nodes' initial lists, no churn.
    pub warm_up: Duration,
    /// The churn's measured time.
    pub duration: Duration,
}

/// One layout's figures.
#[derive(Clone, Debug)]
pub struct Figures {
    /// The layout.
    pub layout: Layout,
    /// Its nodes.
    pub nodes: usize,
    /// Bytes the WAN link carried from the cloud during the warm-up and during the churn.
    pub down: (u64, u64),
    /// Bytes it carried to the cloud, the same two spans.
    pub up: (u64, u64),
    /// The cloud's watches of Services and of EndpointSlices at the end of the churn.
    pub watches: (u64, u64),
    /// Updates the churn made (it goes on through the leader's failover).
    pub updates: u64,
    /// With a leader: the time from its kill until every follower's feeds were on the
    /// cloud, and the followers' agents' failed requests from the kill to 15 s after.
    pub failover: Option<(Duration, u64)>,
}

/// Runs the three layouts.
pub fn run(settings: &Settings) -> Result<Vec<Figures>> {
    let tools = Toolchain::provision()?;
    let etcd = Arc::new(Etcd::start(&tools)?);
    [Layout::One, Layout::Cloud, Layout::Leader]
        .into_iter()
        .map(|layout| run_layout(&tools, &etcd, settings, layout))
        .collect()
}

/// A node of the pool: its gateway and the agents on its proxy.
struct Member {
    gateway: Gateway,
    agents: Process,
    log: PathBuf,
}

impl Member {
    fn start(
        settings: &Settings,
        cluster: &Cluster,
        lan: &Lan,
        index: usize,
        port: u16,
    ) -> Result<Member> {
        let name = format!("edge-{index}");
        let ip = lan.node_ip(index).to_string();
        let netns = lan.node_netns(index);
        let node = PoolNode {
            name: &name,
            pool: POOL,
            ip: &ip,
            port,
            netns: &netns,
        };
        let gateway = start_member(&settings.edgegate, cluster, &cluster.url(), &node, &[])?;
        let log = cluster.dir.join(format!("{name}-agents.log"));
        // The agents run on the node, beside its gateway.
        let args = vec![
            format!("--net={}", netns.display()),
            "--".to_owned(),
            std::env::current_exe()?.display().to_string(),
            "traffic-agents".to_owned(),
            format!("--server={}", gateway.url()),
        ];
        let agents = Process::spawn(&name, Path::new("nsenter"), &args, &log)?;
        Ok(Member {
            gateway,
            agents,
            log,
        })
    }

    /// The agents' failed requests so far (their last counters line).
    fn errors(&self) -> u64 {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines()
            .rfind(|l| l.starts_with("agents: "))
            .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("errors=")))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

fn run_layout(
    tools: &Toolchain,
    etcd: &Arc<Etcd>,
    settings: &Settings,
    layout: Layout,
) -> Result<Figures> {
    let say = |what: &str| eprintln!("edgegate-load pool ({layout:?}): {what}");
    let nodes = if layout == Layout::One {
        1
    } else {
        settings.nodes
    };
    let lan = Lan::create(nodes, &LinkKind::Lan)?;
    let options = ClusterOptions {
        address: lan.uplink.host_ip().into(),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with(tools, etcd.clone(), options)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let admin = Arc::new(Client::new(
        &cluster.url(),
        Some(&cluster.pki.ca_cert),
        Some(ADMIN_TOKEN.to_owned()),
        "edgegate-load/pool",
    )?);
    say(&format!(
        "{} Services and EndpointSlices…",
        settings.services
    ));
    rt.block_on(churn::populate(&admin, settings.services))?;
    let_nodes_in(&cluster)?;
    for index in 0..nodes {
        cluster.apply(&node_object(&format!("edge-{index}"), POOL))?;
    }
    if layout == Layout::Leader {
        let leader = format!("edge-0/{}", lan.node_ip(0));
        cluster.apply(&leader_config_map(POOL, &leader))?;
    }
    let own = rt.block_on(watches(&admin))?;
    let baseline = lan.uplink_bytes()?;
    say(&format!(
        "warm-up: {nodes} gateways and their agents start…"
    ));
    let port = free_port()?;
    let mut members = (0..nodes)
        .map(|index| Member::start(settings, &cluster, &lan, index, port))
        .collect::<Result<Vec<_>>>()?;
    std::thread::sleep(settings.warm_up);
    let warm = lan.uplink_bytes()?;

    say(&format!(
        "churn: {} updates/s for {:?}…",
        settings.churn, settings.duration
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let (client, flag) = (admin.clone(), stop.clone());
    let (services, rate) = (settings.services, settings.churn);
    let churning = rt.spawn(async move { churn::churn(&client, services, rate, flag).await });
    std::thread::sleep(settings.duration);
    let end = lan.uplink_bytes()?;
    let held = rt.block_on(watches(&admin))?;
    for member in &mut members {
        member.agents.check_running()?;
    }

    let failover = if layout == Layout::Leader {
        say("the leader is killed…");
        let before: u64 = members[1..].iter().map(Member::errors).sum();
        let killed = Instant::now();
        members[0].gateway.kill();
        let followers = (nodes - 1) as u64;
        let on_cloud = loop {
            let now = rt.block_on(watches(&admin))?;
            if now.0 - own.0 >= followers && now.1 - own.1 >= followers {
                break killed.elapsed();
            }
            anyhow::ensure!(
                killed.elapsed() < Duration::from_secs(120),
                "the followers' feeds are not on the cloud 120 s after the leader's kill"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        // The agents print their counters every 10 s.
        std::thread::sleep(Duration::from_secs(15));
        let after: u64 = members[1..].iter().map(Member::errors).sum();
        Some((on_cloud, after - before))
    } else {
        None
    };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let updates = rt.block_on(churning)??;
    for member in &mut members {
        member.agents.kill();
        member.gateway.kill();
    }
    Ok(Figures {
        layout,
        nodes,
        down: (warm.1 - baseline.1, end.1 - warm.1),
        up: (warm.0 - baseline.0, end.0 - warm.0),
        watches: (held.0 - own.0, held.1 - own.1),
        updates,
        failover,
    })
}

/// The apiserver's watches of Services and of EndpointSlices.
async fn watches(admin: &Client) -> Result<(u64, u64)> {
    let response = admin.get("/metrics").await?;
    let text = String::from_utf8(kube::body_bytes(response).await?)?;
    let sum = |resource: &str| -> u64 {
        text.lines()
            .filter(|l| {
                (l.starts_with("apiserver_longrunning_gauge{")
                    || l.starts_with("apiserver_longrunning_requests{"))
                    && l.contains("verb=\"WATCH\"")
                    && l.contains(&format!("resource=\"{resource}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    Ok((sum("services"), sum("endpointslices")))
}

/// The Markdown report.
pub fn markdown(settings: &Settings, figures: &[Figures]) -> String {
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let total = |f: &Figures| f.down.0 + f.down.1 + f.up.0 + f.up.1;
    let one = figures.iter().find(|f| f.layout == Layout::One).map(total);
    let mut text = format!(
        "## Pool: the WAN link's bytes for {} nodes\n\n{} Services and EndpointSlices, {} updates/s for {:?} after a {:?} warm-up; \
         each node a network namespace on the pool's LAN with a gateway and 5 simulated agents (list + watch of Services, EndpointSlices, Nodes).\n\n\
         | layout | nodes | cloud → pool, warm-up (MiB) | churn (MiB) | pool → cloud, whole run (MiB) | both ways × one node | cloud watches (services, slices) | updates made (churn, failover) |\n|---|---|---|---|---|---|---|---|\n",
        settings.nodes, settings.services, settings.churn, settings.duration, settings.warm_up
    );
    for f in figures {
        let ratio = one.map_or_else(String::new, |one| {
            format!("{:.2}", total(f) as f64 / one as f64)
        });
        text.push_str(&format!(
            "| {:?} | {} | {:.2} | {:.2} | {:.2} | {ratio} | {:?} | {} |\n",
            f.layout,
            f.nodes,
            mib(f.down.0),
            mib(f.down.1),
            mib(f.up.0 + f.up.1),
            f.watches,
            f.updates
        ));
    }
    for f in figures {
        if let Some((on_cloud, errors)) = f.failover {
            text.push_str(&format!(
                "\nLeader killed: every follower's feeds on the cloud after {:.1} s (heartbeat 10 s); \
                 the followers' agents' failed requests meanwhile: {errors}.\n",
                on_cloud.as_secs_f64()
            ));
        }
    }
    text
}
