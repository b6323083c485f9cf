//! What the node scenarios share: the testbed, manifests, pods, the gateway's counters.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use edgegate_testkit::netns::LinkKind;
use edgegate_testkit::node::GatewayCommand;
use edgegate_testkit::process::wait_until;
use edgegate_testkit::{Testbed, Toolchain, served};

pub use edgegate_testkit::scenario::{ensure_cut, pod, wait_readyz};

/// Brings up the node over a link of `kind` with the `edgegate` binary cargo built for this
/// test.
pub fn start(kind: &LinkKind) -> Result<Testbed> {
    let tools = Toolchain::provision()?;
    let gateway = GatewayCommand {
        program: PathBuf::from(env!("CARGO_BIN_EXE_edgegate")),
        args: Vec::new(),
    };
    Testbed::start_as(&tools, gateway, kind)
}

/// The pods the scenarios run: (name, host network).
pub const PODS: &[(&str, bool)] = &[("host", true), ("bridge", false), ("doomed", true)];

/// `kubectl apply` of `json` in the cloud.
pub fn apply(testbed: &Testbed, json: &str) -> Result<()> {
    testbed.cloud.cluster.apply(json)
}

/// A pod as the cloud has it.
pub fn pod_status(testbed: &Testbed, name: &str) -> Result<serde_json::Value> {
    let text = testbed
        .cloud
        .kubectl(&["get", "pod", name, "-n", "default", "-o", "json"])?;
    Ok(serde_json::from_str(&text)?)
}

/// The containerd id of a pod's container, from its status in the cloud.
pub fn container_id(pod: &serde_json::Value) -> Option<String> {
    let id = pod["status"]["containerStatuses"][0]["containerID"].as_str()?;
    Some(id.strip_prefix("containerd://")?.to_owned())
}

/// Waits until the pods `names` run ready (as the cloud last heard); their container ids.
pub fn wait_pods_running(
    testbed: &mut Testbed,
    names: &[&str],
) -> Result<BTreeMap<String, String>> {
    let mut ids = BTreeMap::new();
    let running = wait_until(Duration::from_secs(120), "the pods to run", || {
        ids.clear();
        names.iter().all(|name| {
            let Ok(pod) = pod_status(testbed, name) else {
                return false;
            };
            let ready = pod["status"]["containerStatuses"][0]["ready"] == true;
            if let Some(id) = container_id(&pod).filter(|_| ready) {
                ids.insert((*name).to_owned(), id);
                true
            } else {
                false
            }
        })
    });
    if let Err(error) = running {
        testbed.node.check_running()?;
        return Err(error.context(testbed.node.log_tail("kubelet", 40)));
    }
    Ok(ids)
}

/// The sum over response codes of `edgegate_requests_total` for a component, verb and
/// resource, from the gateway's hub.
pub fn requests(testbed: &Testbed, component: &str, verb: &str, resource: &str) -> Result<f64> {
    let (status, text) = testbed.node.hub("/metrics")?;
    if status != 200 {
        bail!("/metrics answered {status}");
    }
    let labels = format!(r#"component="{component}",verb="{verb}",resource="{resource}","#);
    Ok(text
        .lines()
        .filter(|l| l.starts_with("edgegate_requests_total{") && l.contains(&labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// Waits until the gateway has served `n` more of a component's requests than `from`.
pub fn wait_requests(
    testbed: &Testbed,
    (component, verb, resource): (&str, &str, &str),
    from: f64,
    n: f64,
    timeout: Duration,
) -> Result<()> {
    let what = format!("{n} more {verb} {resource} of {component} through the gateway");
    wait_until(timeout, &what, || {
        requests(testbed, component, verb, resource).is_ok_and(|now| now >= from + n)
    })
}

/// The lines of `log` that contain any of `patterns`.
pub fn lines_with<'a>(log: &'a str, patterns: &[&str]) -> Vec<&'a str> {
    log.lines()
        .filter(|line| patterns.iter().any(|p| line.contains(p)))
        .collect()
}

/// Fails if kubelet's `log` has lines with any of `patterns`, quoting up to three; `what`
/// names them in the message (e.g. "write errors while cut").
pub fn ensure_kubelet_logged_none(log: &str, patterns: &[&str], what: &str) -> Result<()> {
    let found = lines_with(log, patterns);
    anyhow::ensure!(
        found.is_empty(),
        "kubelet logged {} {what}, e.g.:\n{}",
        found.len(),
        found.iter().take(3).copied().collect::<Vec<_>>().join("\n")
    );
    Ok(())
}

/// Fails if the pods' containers are not the processes of `tasks`, or kube-proxy's rules
/// are not `rules`; `over` says over what (e.g. "while cut").
pub fn ensure_pods_and_rules_kept(
    testbed: &Testbed,
    ids: &BTreeMap<String, String>,
    tasks: &BTreeMap<String, u32>,
    rules: &[String],
    over: &str,
) -> Result<()> {
    anyhow::ensure!(
        pod_tasks(testbed, ids)? == *tasks,
        "the pods' containers changed {over}: before {tasks:?}"
    );
    let after = testbed.node.proxy_rules()?;
    anyhow::ensure!(
        after == rules,
        "kube-proxy's rules changed {over}:\nbefore\n{}\nafter\n{}",
        rules.join("\n"),
        after.join("\n")
    );
    Ok(())
}

/// Waits until kube-proxy's rules are `rules` again; on timeout, fails with both and
/// kube-proxy's log tail.
pub fn wait_rules_back(testbed: &mut Testbed, rules: &[String], timeout: Duration) -> Result<()> {
    let back = wait_until(timeout, "kube-proxy's rules to come back", || {
        testbed.node.proxy_rules().is_ok_and(|now| now == rules)
    });
    if let Err(error) = back {
        testbed.node.check_running()?;
        let now = testbed.node.proxy_rules()?;
        return Err(error.context(format!(
            "before\n{}\nnow\n{}\n{}",
            rules.join("\n"),
            now.join("\n"),
            testbed.node.log_tail("kube-proxy", 20)
        )));
    }
    Ok(())
}

/// The running tasks of the pods' containers: container id → pid.
pub fn pod_tasks(
    testbed: &Testbed,
    ids: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, u32>> {
    let tasks = testbed.node.containerd.running_tasks()?;
    Ok(ids
        .values()
        .filter_map(|id| Some((id.clone(), *tasks.get(id)?)))
        .collect())
}

/// A process's environment variable, read from `/proc/PID/environ` on the host.
pub fn environ(pid: u32, name: &str) -> Result<Option<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ"))
        .with_context(|| format!("reading /proc/{pid}/environ"))?;
    let prefix = format!("{name}=");
    Ok(bytes
        .split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .find_map(|kv| kv.strip_prefix(&prefix).map(str::to_owned)))
}

/// The sets the gateway's store holds: (component, resource, namespace, selectors).
pub fn cached_sets(testbed: &Testbed) -> Result<BTreeSet<String>> {
    let (status, body) = testbed.node.hub("/v1/cache")?;
    ensure!(status == 200, "/v1/cache answered {status}: {body}");
    let sets: Vec<serde_json::Value> = serde_json::from_str(&body)?;
    Ok(sets
        .iter()
        .map(|set| {
            [
                "component",
                "resource",
                "namespace",
                "label_selector",
                "field_selector",
            ]
            .map(|field| set[field].as_str().unwrap_or_default())
            .join(" ")
        })
        .collect())
}

/// Online, lists every Endpoints object through the gateway as a node-local CoreDNS does,
/// and waits until the gateway has cached that set.
pub fn cache_endpoints_as_coredns(testbed: &Testbed) -> Result<()> {
    served::read_through_gateway(testbed, served::COREDNS, served::ALL_ENDPOINTS)?;
    wait_until(
        Duration::from_secs(30),
        "CoreDNS's Endpoints to be cached",
        || {
            cached_sets(testbed).is_ok_and(|sets| {
                sets.iter()
                    .any(|set| set.starts_with("coredns endpoints.v1.core "))
            })
        },
    )
}
