//! (a) The node joins through edgegate: Ready, pods run on the host network and on the CNI
//! bridge, the node reaches the bridge pod's Service at its ClusterIP, and kubelet's lease
//! renewals never conflict.

use std::time::Duration;

use anyhow::{Result, ensure};
use edgegate_testkit::Testbed;
use edgegate_testkit::served;

use crate::support::{
    PODS, apply, ensure_kubelet_logged_none, pod, pod_status, pod_tasks, requests,
    wait_pods_running, wait_requests,
};

/// What kubelet logs when its lease renewal is refused because someone else renewed it.
pub const LEASE_CONFLICT: &[&str] = &["failed to update lease", "the object has been modified"];

/// The node registers and is Ready through the gateway (Testbed::start waits for it), its
/// pods run, a request from the node to the bridge pod's Service is answered, and kubelet's lease renewals (at least three, through the gateway) meet no
/// conflict with the gateway's own node-lease heartbeat.
pub fn the_node_joins_through_edgegate_and_runs_pods(testbed: &mut Testbed) -> Result<()> {
    let renewals = requests(testbed, "kubelet", "update", "leases")?;
    for (name, host_network) in PODS {
        let pod = if *name == served::BACKEND {
            served::backend_pod()
        } else {
            pod(name, *host_network)
        };
        apply(testbed, &pod.to_string())?;
    }
    let cluster_ip = served::create(testbed)?;
    let names: Vec<&str> = PODS.iter().map(|(name, _)| *name).collect();
    let ids = wait_pods_running(testbed, &names)?;
    let tasks = pod_tasks(testbed, &ids)?;
    ensure!(
        tasks.len() == ids.len(),
        "containerd runs {tasks:?}, the cloud says {ids:?}"
    );
    let bridge = pod_status(testbed, "bridge")?;
    let ip = bridge["status"]["podIP"].as_str().unwrap_or_default();
    let prefix = format!("198.19.{}.", testbed.link.index);
    ensure!(
        ip.starts_with(&prefix),
        "the bridge pod's IP {ip} is not in {prefix}0/24"
    );
    let took = served::wait_answers(testbed, &cluster_ip, Duration::from_secs(90))?;
    eprintln!(
        "the node reached {} at {cluster_ip} in {took:?}",
        served::SERVED
    );
    let host = pod_status(testbed, "host")?;
    let node_ip = testbed.link.node_ip().to_string();
    ensure!(
        host["status"]["podIP"] == node_ip.as_str(),
        "the host-network pod's IP is {}, not the node's {node_ip}",
        host["status"]["podIP"]
    );

    // kubelet renews its lease every 10 s; three renewals overlap the gateway's heartbeat.
    wait_requests(
        testbed,
        ("kubelet", "update", "leases"),
        renewals,
        3.0,
        Duration::from_secs(90),
    )?;
    let log = testbed.node.log("kubelet");
    ensure_kubelet_logged_none(&log, LEASE_CONFLICT, "lease conflicts")?;
    Ok(())
}
