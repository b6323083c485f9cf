//! What the local layer costs a full node: 110 pods (kubelet's default `--max-pods`),
//! each of whose status kubelet writes three times while the cloud is away.

use anyhow::{Context, Result, ensure};
use edgegate_testkit::process::proc_status_bytes;

use crate::own_node::OwnNode;
use crate::own_writes::{KUBELET, write};
use crate::support::{Env, apply, client, list_as, metric, runtime, wait_readyz, wait_sets};

/// kubelet's default `--max-pods`.
const PODS: usize = 110;

/// How many times each pod's status is written while cut.
const ROUNDS: usize = 3;

/// The most the gateway's resident memory may grow by, at its peak, while it takes the
/// writes: a few copies of one pod at a time, and the store's pages.
const GROWTH_BOUND: u64 = 16 << 20;

/// Offline, 330 status patches of a node's 110 pods: `/metrics` counts the 110 pods as the
/// node's own, within the layer's bound; the gateway's peak RSS over them, its
/// RSS after them and the store's size, printed; the peak's growth stays within
/// [`GROWTH_BOUND`] (the layer keeps nothing per pod in memory: every write is read from,
/// and written to, the store).
pub fn the_local_layer_for_a_node_with_110_pods(env: &Env) -> Result<()> {
    let OwnNode {
        node,
        ns,
        relay,
        mut gateway,
    } = OwnNode::start(env, "full", &[])?;
    let items: Vec<serde_json::Value> = (0..PODS)
        .map(|i| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("pod-{i}"), "namespace": ns,
                    "labels": {"app": format!("app-{}", i % 10)}},
                "spec": {"nodeName": node, "containers": [
                    {"name": "main", "image": "registry.invalid/app:1",
                     "ports": [{"containerPort": 8080}]}]},
            })
        })
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    apply(&env.cluster, &gateway.dir, "pods.json", &list.to_string())?;
    let rt = runtime();
    let client = client();
    let base = gateway.url();
    let pods_url = format!("{base}/api/v1/pods?fieldSelector=spec.nodeName%3D{node}");
    let (_, listed) = rt.block_on(list_as(
        &client,
        &format!("{pods_url}&resourceVersion=0"),
        KUBELET,
    ))?;
    ensure!(listed.len() == PODS, "kubelet lists {} pods", listed.len());
    wait_sets(gateway.hub, "kubelet", 1)?;

    ensure!(
        metric(gateway.hub, "edgegate_cache_local_objects")? == 0.0,
        "nothing is the node's own before the cut"
    );
    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;
    let pid = gateway.process().context("the gateway runs")?.pid();
    let cache = gateway.dir.join("cache");
    let (rss_before, store_before) = (proc_status_bytes(pid, "VmRSS:")?, size(&cache)?);
    // The peak from here on.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")?;
    for round in 0..ROUNDS {
        for i in 0..PODS {
            let url = format!("{base}/api/v1/namespaces/{ns}/pods/pod-{i}/status");
            let ip = format!("10.88.{}.{}", round, i + 2);
            let patch = serde_json::json!({"status": {
                "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2026-12-04T00:00:00Z"}],
                "containerStatuses": [{"name": "main", "ready": true, "restartCount": round,
                    "image": "registry.invalid/app:1", "imageID": "",
                    "state": {"running": {"startedAt": "2026-12-04T00:00:00Z"}}}],
            }});
            let (status, body) = rt.block_on(write(
                &client,
                http::Method::PATCH,
                &url,
                "application/strategic-merge-patch+json",
                &patch.to_string(),
            ))?;
            ensure!(
                status == 200 && body["status"]["podIP"] == ip.as_str(),
                "pod-{i}: {status} {body}"
            );
        }
    }
    let peak = proc_status_bytes(pid, "VmHWM:")?;
    // kubelet's copy of each pod is the node's own now, each once however often written.
    let objects = metric(gateway.hub, "edgegate_cache_local_objects")?;
    let bytes = metric(gateway.hub, "edgegate_cache_local_bytes")?;
    ensure!(
        objects == PODS as f64,
        "/metrics counts {objects} objects of the node's own, not {PODS}"
    );
    ensure!(
        bytes > 0.0 && bytes <= edgegate::cache::LOCAL_LAYER_BYTES as f64,
        "/metrics counts {bytes} bytes of the node's own"
    );
    let (rss_after, store_after) = (proc_status_bytes(pid, "VmRSS:")?, size(&cache)?);
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    eprintln!(
        "the local layer, {} status patches of {PODS} pods offline: {objects} objects, {:.2} MiB in /metrics; RSS {:.1} MiB before, peak {:.1} (+{:.1}), {:.1} after; the store {:.2} → {:.2} MiB",
        ROUNDS * PODS,
        mib(bytes as u64),
        mib(rss_before),
        mib(peak),
        mib(peak.saturating_sub(rss_before)),
        mib(rss_after),
        mib(store_before),
        mib(store_after),
    );
    ensure!(
        peak.saturating_sub(rss_before) <= GROWTH_BOUND,
        "the gateway's RSS grew by {:.1} MiB at its peak",
        mib(peak.saturating_sub(rss_before))
    );
    Ok(())
}

/// The bytes of the files under `dir`.
fn size(dir: &std::path::Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}
