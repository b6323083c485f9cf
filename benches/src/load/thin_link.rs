//! `edgegate-load thin-link`: the node workload of `traffic` across a thin link (OpenYurt
//! #1101: nodes on 50 kbit/s links never finished their initial lists). Per mode, the node's
//! components start against a cloud of N Services and EndpointSlices, and the harness
//! times the node's first status after the start (kubelet registered and Ready) and
//! kube-proxy's rules for every Service; then a slow churn runs, the link is cut for a
//! while with the churn going on, and restored, and the harness times kube-proxy's rules
//! until they match the cloud's EndpointSlices. Counted throughout: the link's bytes each
//! way and the LISTs the apiserver served (its `apiserver_request_total`), so a re-list
//! shows.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use edgegate_testkit::Toolchain;
use edgegate_testkit::netns::LinkKind;
use edgegate_testkit::testbed::NODE;
use edgegate_testkit::wan::Wan;
use serde_json::Value;

use super::churn::NAMESPACE;
use super::node::metric_sum_where;
use super::reflector::counter;
use super::traffic::{self, Mode, NodeLoad};

mod report;

pub use report::markdown;

/// How often the harness reads the node's rules and the cloud.
const POLL: Duration = Duration::from_secs(2);

/// What a run does.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The edgegate binary.
    pub edgegate: PathBuf,
    /// Flags for the gateway after the node's own.
    pub gateway_flags: Vec<String>,
    /// The modes, run one after the other.
    pub modes: Vec<Mode>,
    /// Services (and EndpointSlices) in the cloud.
    pub services: usize,
    /// Updates a second during the churn.
    pub churn: u32,
    /// The churn's time with the link up, before the cut.
    pub churn_time: Duration,
    /// How long the link stays cut (the churn goes on).
    pub cut: Duration,
    /// How long the join, and the catch-up after the restore, may take before the harness
    /// reports them unfinished.
    pub deadline: Duration,
    /// The link.
    pub wan: Wan,
}

/// The link of OpenYurt #1101's nodes: 50 kbit/s, 300 ms RTT, 2 % loss, and a queue of
/// about 2.5 s at that rate.
pub fn thin_wan() -> Wan {
    Wan {
        delay: Duration::from_millis(150),
        loss: 0.02,
        rate: 50_000,
        queue: 16 * 1024,
        ..Wan::default()
    }
}

/// The link's bytes each way and the apiserver's LISTs, read at one moment.
#[derive(Clone, Debug, Default)]
struct Reading {
    /// Node → cloud.
    up: u64,
    /// Cloud → node.
    down: u64,
    /// LIST requests of the node's resources the apiserver served, by resource and scope.
    lists: BTreeMap<String, f64>,
    /// The node's LISTs of Services and EndpointSlices the gateway passed on, not answered
    /// from the multiplexer's state (none without a gateway).
    passed_on: Option<f64>,
}

/// One phase's counts.
#[derive(Clone, Debug, Default)]
pub struct Spent {
    /// Node → cloud bytes.
    pub up: u64,
    /// Cloud → node bytes.
    pub down: u64,
    /// LISTs the apiserver served, less the harness's own.
    pub lists: f64,
    /// Those LISTs by resource and scope (`pods cluster`), where there were any.
    pub listed: BTreeMap<String, f64>,
    /// The node's LISTs of Services and EndpointSlices the gateway passed on, its feed's
    /// pages with them (none without a gateway). The apiserver's count has the cloud's
    /// controller-manager's too.
    pub passed_on: Option<f64>,
}

impl Spent {
    fn between(from: &Reading, to: &Reading) -> Spent {
        let listed: BTreeMap<String, f64> = to
            .lists
            .iter()
            .map(|(key, n)| (key.clone(), n - from.lists.get(key).unwrap_or(&0.0)))
            .filter(|(_, n)| *n >= 1.0)
            .collect();
        Spent {
            up: to.up - from.up,
            down: to.down - from.down,
            lists: listed.values().sum(),
            listed,
            passed_on: to.passed_on.zip(from.passed_on).map(|(to, from)| to - from),
        }
    }

    /// Leaves out `n` LISTs of `key` (the harness's own).
    fn leave_out(&mut self, key: &str, n: f64) {
        if let Some(listed) = self.listed.get_mut(key) {
            let left = n.min(*listed);
            *listed -= left;
            self.lists -= left;
            if *listed < 1.0 {
                self.listed.remove(key);
            }
        }
    }

    /// The LISTs by resource, for a report: `pods cluster 2, nodes cluster 1`.
    pub fn listed_text(&self) -> String {
        let parts: Vec<String> = self
            .listed
            .iter()
            .map(|(key, n)| format!("{key} {n:.0}"))
            .collect();
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// One mode's figures.
#[derive(Clone, Debug)]
pub struct Figures {
    /// The mode.
    pub mode: Mode,
    /// From the start to the node's first status with `Ready` true.
    pub ready: Option<Duration>,
    /// From the start to kube-proxy's rules naming every Service.
    pub rules: Option<Duration>,
    /// The join: from the start until both, or the deadline.
    pub join: Spent,
    /// The churn with the link up, the cut, and the catch-up after the restore.
    pub after: Spent,
    /// From the restore to kube-proxy sending every Service where the cloud's
    /// EndpointSlices say.
    pub caught_up: Option<Duration>,
    /// Updates the churn made.
    pub updates: u64,
    /// The agents' last counters line.
    pub agents: String,
}

/// Runs every mode of `settings`, one test bed each.
pub fn run(settings: &Settings) -> Result<Vec<Figures>> {
    traffic::each_mode(&settings.modes, |tools, mode| {
        run_mode(tools, settings, mode)
    })
}

fn run_mode(tools: &Toolchain, settings: &Settings, mode: Mode) -> Result<Figures> {
    let say = |what: &str| eprintln!("edgegate-load thin-link ({mode:?}): {what}");
    let link = LinkKind::Wan(settings.wan.clone());
    let mut load = NodeLoad::prepare(
        tools,
        &settings.edgegate,
        settings.services,
        mode,
        &link,
        &say,
    )?;
    let baseline = read(&load, mode)?;
    let heartbeat = ready_heartbeat(&load)?;

    say("join: the components start and list…");
    load.start(&settings.gateway_flags, None)?;
    let started = Instant::now();
    let (mut ready, mut rules) = (None, None);
    while started.elapsed() < settings.deadline && (ready.is_none() || rules.is_none()) {
        std::thread::sleep(POLL);
        load.check_running()?;
        if ready.is_none()
            && ready_heartbeat(&load)?.is_some_and(|now| Some(&now) != heartbeat.as_ref())
        {
            ready = Some(started.elapsed());
            say(&format!(
                "the node posted Ready after {:?}",
                started.elapsed()
            ));
        }
        if rules.is_none() && routed(&proxied(&load)?) >= settings.services {
            rules = Some(started.elapsed());
            say(&format!(
                "kube-proxy had every Service after {:?}",
                started.elapsed()
            ));
        }
    }
    let joined = read(&load, mode)?;

    say(&format!(
        "churn: {} updates/s, {:?} with the link up, then {:?} cut…",
        settings.churn, settings.churn_time, settings.cut
    ));
    let churning = load.churn(settings.services, settings.churn);
    std::thread::sleep(settings.churn_time);
    load.check_running()?;
    load.bed.link.cut()?;
    std::thread::sleep(settings.cut);
    load.bed.link.restore()?;
    let restored = Instant::now();
    let updates = churning.finish(&load.rt)?;
    say("restored: waiting for kube-proxy to match the cloud…");
    let mut caught_up = None;
    // The harness's own lists of the cloud's slices, from the host, not across the link.
    let mut own_lists = 0.0;
    while restored.elapsed() < settings.deadline {
        std::thread::sleep(POLL);
        load.check_running()?;
        own_lists += 1.0;
        if proxied(&load)? == cloud_destinations(&load)? {
            caught_up = Some(restored.elapsed());
            break;
        }
    }
    let end = read(&load, mode)?;
    let mut after = Spent::between(&joined, &end);
    after.leave_out(OWN_LISTS, own_lists);
    load.stop_agents();
    Ok(Figures {
        mode,
        ready,
        rules,
        join: Spent::between(&baseline, &joined),
        after,
        caught_up,
        updates,
        agents: load.agents_counters(),
    })
}

/// What a run through the gateway must show, per mode but `direct` (the failure mode the
/// gateway is measured against): the node Ready and kube-proxy's rules complete within the
/// deadline, no re-list by the agents, no LIST of Services or EndpointSlices passed on by
/// the gateway from the end of the join on (the churn and the cut reach the node by watch),
/// and kube-proxy's rules matching the cloud after the restore. A LIST of what the node
/// wrote while cut (its Node) is the gateway's design: that watch lists again from the
/// cloud, which holds the truth. Empty when all is well.
pub fn faults(figures: &[Figures]) -> Vec<String> {
    let mut faults = Vec::new();
    for f in figures.iter().filter(|f| f.mode != Mode::Direct) {
        let mut fault = |what: String| faults.push(format!("{:?}: {what}", f.mode));
        if f.ready.is_none() {
            fault("the node was not Ready within the deadline".into());
        }
        if f.rules.is_none() {
            fault("kube-proxy's rules lacked Services at the deadline".into());
        }
        if f.caught_up.is_none() {
            fault("kube-proxy's rules did not match the cloud after the restore".into());
        }
        match counter(&f.agents, "relists") {
            Some(0) => {}
            Some(n) => fault(format!("the agents listed again {n} times")),
            None => fault(format!("no agents' counters ({:?})", f.agents)),
        }
        match f.after.passed_on {
            Some(n) if n < 1.0 => {}
            Some(n) => fault(format!(
                "the gateway passed on {n} LISTs of Services or EndpointSlices after the join"
            )),
            None => fault("no count of the LISTs the gateway passed on".into()),
        }
    }
    faults
}

/// The link's counters (the host's end of it), the apiserver's LISTs and the gateway's.
fn read(load: &NodeLoad, mode: Mode) -> Result<Reading> {
    let (up, down) = load.link_bytes()?;
    let metrics = load.bed.cloud.kubectl(&["get", "--raw", "/metrics"])?;
    let passed_on = match mode {
        Mode::Direct => None,
        // Before the join's start the gateway may not run yet.
        _ => match load.bed.node.hub("/metrics") {
            Ok((200, metrics)) => Some(passed_on(&metrics)),
            _ => None,
        },
    };
    Ok(Reading {
        up,
        down,
        lists: list_counts(&metrics),
        passed_on,
    })
}

/// The LISTs of Services and EndpointSlices the gateway took and did not answer from the
/// multiplexer's state, from its `/metrics`.
fn passed_on(metrics: &str) -> f64 {
    let pool_scope = |line: &str| {
        line.contains("verb=\"list\"")
            && ["services", "endpointslices"]
                .iter()
                .any(|resource| line.contains(&format!("resource=\"{resource}\"")))
    };
    let answered = |line: &str| {
        line.contains("verb=\"list\"")
            && (line.contains("resource=\"v1/services\"") || line.contains("/endpointslices\""))
    };
    metric_sum_where(metrics, "edgegate_requests_total", pool_scope)
        - metric_sum_where(metrics, "edgegate_multiplexer_answers_total", answered)
}

/// The resources the node's components and the gateway list. The cloud's
/// controller-manager lists others on its own, some every 10 s (the CronJob controller of
/// 1.20 lists every Job and CronJob), whatever the node does.
const NODE_LISTS: &[&str] = &[
    "nodes",
    "services",
    "endpointslices",
    "endpoints",
    "pods",
    "configmaps",
    "secrets",
    "runtimeclasses",
    "csidrivers",
    "csinodes",
    "nodepools",
    "leases",
];

/// The key of the harness's own LISTs in [`Reading::lists`]: the cloud's slices in the
/// churn's namespace.
const OWN_LISTS: &str = "endpointslices namespace";

/// The LIST requests of the node's resources ([`NODE_LISTS`]) the apiserver served, from
/// its `/metrics`, by resource and scope.
fn list_counts(metrics: &str) -> BTreeMap<String, f64> {
    let mut counts = BTreeMap::new();
    let lists = |line: &str| line.contains("verb=\"LIST\"");
    for line in metrics.lines().filter(|line| lists(line)) {
        let (Some(resource), Some(scope)) = (label(line, "resource"), label(line, "scope")) else {
            continue;
        };
        if NODE_LISTS.contains(&resource) {
            let n = metric_sum_where(line, "apiserver_request_total", lists);
            *counts.entry(format!("{resource} {scope}")).or_insert(0.0) += n;
        }
    }
    counts.retain(|_, n| *n > 0.0);
    counts
}

/// The value of `name` among a Prometheus line's labels (`resource`, not `subresource`).
fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let (_, labels) = line.split_once('{')?;
    labels.split(',').find_map(|pair| {
        let value = pair.strip_prefix(name)?.strip_prefix("=\"")?;
        value.split('"').next()
    })
}

/// The node's `Ready` condition's last heartbeat, if the condition is true.
fn ready_heartbeat(load: &NodeLoad) -> Result<Option<String>> {
    let node: Value = serde_json::from_str(
        &load
            .bed
            .cloud
            .kubectl(&["get", "node", NODE, "-o", "json"])?,
    )?;
    let ready = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready" && c["status"] == "True");
    Ok(ready
        .and_then(|c| c["lastHeartbeatTime"].as_str())
        .map(str::to_owned))
}

/// Where kube-proxy sends each of the cloud's Services' `http` port: Service name → the
/// sorted addresses of its rules (none for one it has no rule for).
fn proxied(load: &NodeLoad) -> Result<BTreeMap<String, Vec<String>>> {
    let table = load.bed.node.run("iptables-save", &["-t", "nat"])?;
    Ok(destinations(&table))
}

/// The same from an `iptables-save` of the nat table. The Service's rule in
/// `KUBE-SERVICES` names its chain; that chain jumps to one chain per endpoint, whose DNAT
/// names the address (kube-proxy leaves the comments off those past 1 000 endpoints, so
/// the chains are followed, not the comments).
fn destinations(table: &str) -> BTreeMap<String, Vec<String>> {
    let prefix = format!("--comment \"{NAMESPACE}/");
    let mut jumps: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut services = Vec::new();
    for line in table.lines() {
        let Some(rule) = line.strip_prefix("-A ") else {
            continue;
        };
        let chain = rule.split(' ').next().unwrap_or_default();
        let target = rule.split(" -j ").nth(1).and_then(|t| t.split(' ').next());
        if let Some(target) = target {
            jumps.entry(chain).or_default().push(target);
        }
        if let Some(to) = rule.split("--to-destination ").nth(1) {
            let address = to.split(':').next().unwrap_or(to);
            jumps.entry(chain).or_default().push(address);
        }
        if chain == "KUBE-SERVICES"
            && let Some((_, rest)) = rule.split_once(&prefix)
            && let Some((service, _)) = rest.split_once(":http cluster IP\"")
            && let Some(target) = target.filter(|t| t.starts_with("KUBE-SVC-"))
        {
            services.push((service.to_owned(), target));
        }
    }
    let mut found = BTreeMap::new();
    for (service, chain) in services {
        let mut addresses: Vec<String> = jumps
            .get(chain)
            .into_iter()
            .flatten()
            .filter(|sep| sep.starts_with("KUBE-SEP-"))
            .flat_map(|sep| jumps.get(sep).into_iter().flatten())
            .filter(|to| to.parse::<std::net::Ipv4Addr>().is_ok())
            .map(|to| (*to).to_owned())
            .collect();
        addresses.sort();
        if !addresses.is_empty() {
            found.insert(service, addresses);
        }
    }
    found
}

/// How many Services kube-proxy sends somewhere.
fn routed(proxied: &BTreeMap<String, Vec<String>>) -> usize {
    proxied.len()
}

/// Where the cloud's EndpointSlices say each Service's `http` port goes: its ready
/// endpoints' addresses, sorted (Services with none left out, as kube-proxy has no rule).
/// One LIST, not kubectl's pages of 500, so that the harness knows how many it made.
fn cloud_destinations(load: &NodeLoad) -> Result<BTreeMap<String, Vec<String>>> {
    let list: Value = serde_json::from_str(&load.bed.cloud.kubectl(&[
        "get",
        "endpointslices.v1beta1.discovery.k8s.io",
        "--chunk-size=0",
        "-n",
        NAMESPACE,
        "-o",
        "json",
    ])?)?;
    let items = list["items"]
        .as_array()
        .context("no items in the slices' list")?;
    Ok(ready_addresses(items))
}

/// Each Service's ready addresses in `slices`, sorted, each once; Services with none left
/// out.
fn ready_addresses(slices: &[Value]) -> BTreeMap<String, Vec<String>> {
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for slice in slices {
        let Some(service) = slice["metadata"]["labels"]["kubernetes.io/service-name"].as_str()
        else {
            continue;
        };
        let entry = found.entry(service.to_owned()).or_default();
        for endpoint in slice["endpoints"].as_array().into_iter().flatten() {
            if endpoint["conditions"]["ready"] == false {
                continue;
            }
            for address in endpoint["addresses"].as_array().into_iter().flatten() {
                entry.extend(address.as_str().map(str::to_owned));
            }
        }
    }
    // The churn may give two endpoints one address; kube-proxy makes one rule of it.
    for addresses in found.values_mut() {
        addresses.sort();
        addresses.dedup();
    }
    found.retain(|_, addresses| !addresses.is_empty());
    found
}

#[cfg(test)]
mod tests;
