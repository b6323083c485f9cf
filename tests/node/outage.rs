//! (c, d, f) The cloud link drops: the node keeps running on what edgegate cached, its
//! components restart on it, and what changed in the cloud arrives after the reconnect.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::node_watch::NodeWatch;
use edgegate_testkit::process::wait_until;
use edgegate_testkit::scenario::{self, restore_and_time};
use edgegate_testkit::{Testbed, served};

use crate::support::{
    ensure_cut, ensure_kubelet_logged_none, ensure_pods_and_rules_kept, lines_with, pod_status,
    pod_tasks, requests, wait_pods_running, wait_readyz, wait_requests, wait_rules_back,
};

/// What kubelet logs when a write (lease, node status, event) gets no answer it accepts.
pub const WRITE_ERRORS: &[&str] = &[
    "Error updating node status",
    "failed to update lease",
    "Server rejected event",
    "Unable to write event",
];

/// The pods that live through the whole outage.
pub const KEPT: &[&str] = &["host", "bridge"];

/// (c) With the link cut, for at least 6 lease renewals and 6 node status checks of
/// kubelet (it reads its Node every 10 s and patches it when something changed, or every
/// 5 minutes: a minute and more): a watch of the node's pods from the cloud ends and is fed
/// from the cache with the node's own writes (see [`fed_from_the_cache_after_the_cut`]),
/// the pods' containers keep running (the same processes), every write kubelet makes is
/// answered, and kube-proxy's rules stay as they were.
/// Leaves the link cut.
pub fn a_cut_link_keeps_the_node_running(testbed: &mut Testbed) -> Result<()> {
    let ids = wait_pods_running(testbed, KEPT)?;
    let tasks = pod_tasks(testbed, &ids)?;
    let rules = testbed.node.proxy_rules()?;
    ensure!(
        rules.iter().any(|r| r.contains("default/kubernetes")),
        "kube-proxy has no rule for default/kubernetes:\n{}",
        rules.join("\n")
    );

    // A watch of the node's pods as kubelet's, fed from the cloud.
    let pods = format!(
        "/api/v1/pods?fieldSelector=spec.nodeName%3D{}",
        testbed.node.name
    );
    let listed = served::read_through_gateway(testbed, served::KUBELET, &pods)?;
    let listed_at = listed["metadata"]["resourceVersion"]
        .as_str()
        .context("the pod list has no resourceVersion")?
        .to_owned();
    let mut fed = NodeWatch::open(
        &testbed.node,
        served::KUBELET,
        &format!("{pods}&watch=true&resourceVersion={listed_at}"),
    )?;
    // Fed from the cloud before the cut: a change made there arrives on it.
    let mark = format!("edgegate.test/watched={listed_at}");
    testbed.cloud.kubectl(&[
        "annotate",
        "pod",
        "host",
        "-n",
        "default",
        &mark,
        "--overwrite",
    ])?;
    fed.wait_for(Duration::from_secs(60), |event| {
        event["type"] == "MODIFIED"
            && event["object"]["metadata"]["annotations"]["edgegate.test/watched"]
                == listed_at.as_str()
    })
    .context("the watch from the cloud")?;

    let cut = Instant::now();
    ensure_cut(testbed)?;
    fed_from_the_cache_after_the_cut(testbed, &mut fed, &pods, &listed_at, cut)?;
    // From when the gateway serves from its cache: a write in flight at the moment of the
    // cut went to the cloud and can only time out (kubelet gives up after 10 s).
    let kubelet_log = testbed.node.log("kubelet").len();
    let leases = requests(testbed, "kubelet", "update", "leases")?;
    let status = requests(testbed, "kubelet", "get", "nodes")?;
    wait_requests(
        testbed,
        ("kubelet", "update", "leases"),
        leases,
        6.0,
        Duration::from_secs(180),
    )?;
    wait_requests(
        testbed,
        ("kubelet", "get", "nodes"),
        status,
        6.0,
        Duration::from_secs(180),
    )?;

    ensure_pods_and_rules_kept(testbed, &ids, &tasks, &rules, "while cut")?;
    let log = testbed.node.log("kubelet");
    ensure_kubelet_logged_none(&log[kubelet_log..], WRITE_ERRORS, "write errors while cut")?;
    Ok(())
}

/// The cut as YurtHub's users meet it (#2792): the link goes down and nothing resets the
/// watch's connection to the cloud. The watch `fed` from the cloud ends once the gateway
/// takes the cloud for unreachable, a watch again from its last version is fed from the
/// cache, and it gets a status write of the node's own pod made meanwhile. Prints the times
/// from the cut.
fn fed_from_the_cache_after_the_cut(
    testbed: &Testbed,
    fed: &mut NodeWatch,
    pods: &str,
    listed_at: &str,
    cut: Instant,
) -> Result<()> {
    // Hang guards, not bounds on time: the health checks decide when the cloud is gone.
    let (ended, last) = fed
        .until_end(Duration::from_secs(180))
        .context("the watch from the cloud did not end after the cut")
        .with_context(|| testbed.node.log_tail("edgegate", 40))?;
    let from = last.unwrap_or_else(|| listed_at.to_owned());
    let mut again = NodeWatch::open(
        &testbed.node,
        served::KUBELET,
        &format!("{pods}&watch=true&allowWatchBookmarks=true&resourceVersion={from}"),
    )?;
    // Its first event: the node's own writes since `from`, if any, else its bookmark.
    let (fed_again, event) = again
        .next(Duration::from_secs(60))?
        .context("the watch again ended at once")?;
    ensure!(
        event["type"] != "ERROR",
        "the watch again from the cache: {event}"
    );
    let condition = "edgegate.test/cut";
    let written = Instant::now();
    served::write_through_gateway(
        testbed,
        served::KUBELET,
        "PATCH",
        "/api/v1/namespaces/default/pods/host/status",
        "application/strategic-merge-patch+json",
        &format!(r#"{{"status":{{"conditions":[{{"type":"{condition}","status":"True"}}]}}}}"#),
    )?;
    let (seen, _) = again.wait_for(Duration::from_secs(60), |event| {
        event["type"] == "MODIFIED"
            && event["object"]["metadata"]["name"] == "host"
            && event["object"]["status"]["conditions"]
                .as_array()
                .is_some_and(|all| all.iter().any(|c| c["type"] == condition))
    })?;
    eprintln!(
        "after the cut, the watch from the cloud ended in {:?}; watched again, it was fed from the cache {:?} after the cut, and got the pod's local status write {:?} after it was made",
        ended - cut,
        fed_again - cut,
        seen.saturating_duration_since(written)
    );
    Ok(())
}

/// (d) Still cut: kubelet restarted keeps every pod (the same processes) and has its node
/// registration answered; kube-proxy restarted after its chains were flushed programs the
/// same rules from the cache. Leaves the link cut.
pub fn restarts_while_cut_keep_the_pods_and_rules(testbed: &mut Testbed) -> Result<()> {
    let ids = wait_pods_running(testbed, KEPT)?;
    let rules = testbed.node.proxy_rules()?;
    ensure_cut(testbed)?;
    let tasks = pod_tasks(testbed, &ids)?;

    let offset = testbed.node.log("kubelet").len();
    let leases = requests(testbed, "kubelet", "update", "leases")?;
    testbed.node.kill_kubelet();
    testbed.node.start_kubelet()?;
    wait_until(
        Duration::from_secs(60),
        "kubelet to try to register the node",
        || testbed.node.log("kubelet")[offset..].contains("Attempting to register node"),
    )?;
    // Pod cleanup runs every 2 s once the pods are known: two lease renewals later, a
    // kubelet that had been told "no pods" would have killed them.
    wait_until(
        Duration::from_secs(60),
        "kubelet to take its pods from the gateway",
        || {
            let log = testbed.node.log("kubelet");
            let added = lines_with(&log[offset..], &[r#"SyncLoop (ADD, "api")"#]).join("\n");
            KEPT.iter()
                .all(|pod| added.contains(&format!("{pod}_default(")))
        },
    )?;
    wait_requests(
        testbed,
        ("kubelet", "update", "leases"),
        leases,
        2.0,
        Duration::from_secs(60),
    )?;
    testbed.node.check_running()?;
    ensure!(
        pod_tasks(testbed, &ids)? == tasks,
        "kubelet restarted while cut changed the pods' containers: before {tasks:?}"
    );
    // Checked last, so that kube-proxy's restart is tried whatever kubelet was told.
    let log = testbed.node.log("kubelet");
    let registration = lines_with(&log[offset..], &["register node", "registered node"]).join("\n");

    testbed.node.kill_kube_proxy();
    testbed.node.flush_proxy_rules()?;
    let flushed = testbed.node.proxy_rules()?;
    ensure!(
        flushed != rules,
        "flushing left kube-proxy's rules in place"
    );
    testbed.node.start_kube_proxy()?;
    wait_rules_back(testbed, &rules, Duration::from_secs(60))?;
    ensure!(
        registration.contains("Successfully registered node"),
        "kubelet restarted while cut had no answer to its node registration:\n{registration}"
    );
    Ok(())
}

/// (f) A pod deleted in the cloud while the link is cut keeps running (the node cannot
/// know), and is stopped once the link is back; prints how long that took from the link's
/// return. Once kubelet has finished deleting it in the cloud, it leaves kubelet's cache.
/// The other pods keep their containers, restarted never. Leaves the link up.
pub fn a_pod_deleted_in_the_cloud_stops_after_reconnect(testbed: &mut Testbed) -> Result<()> {
    let ids = wait_pods_running(testbed, KEPT)?;
    ensure_cut(testbed)?;
    let tasks = pod_tasks(testbed, &ids)?;
    let running = |testbed: &Testbed| {
        testbed
            .node
            .containerd
            .pod_containers()
            .is_ok_and(|pods| pods.contains_key("doomed"))
    };
    ensure!(
        running(testbed),
        "the doomed pod's container is not running while cut"
    );
    testbed
        .cloud
        .kubectl(&["delete", "pod", "doomed", "-n", "default", "--wait=false"])?;
    ensure!(
        running(testbed),
        "the doomed pod's container stopped while cut"
    );

    let stopped = restore_and_time(
        testbed,
        &mut [("the deleted pod's container to stop", &mut |t: &Testbed| {
            !running(t)
        })],
    )?[0];
    println!("link restored → deleted pod's container stopped: {stopped:.1?}");
    let left = scenario::wait_gone_from_cache(testbed, "default", "doomed")?;
    println!("deleted pod gone from the cloud → from kubelet's cache: {left:.1?}");
    wait_readyz(testbed, false)?;
    testbed.node.wait_ready(&testbed.cloud)?;
    ensure!(
        pod_tasks(testbed, &ids)? == tasks,
        "the kept pods' containers changed over the outage: before {tasks:?}"
    );
    let restarts: BTreeMap<&str, serde_json::Value> = KEPT
        .iter()
        .map(|pod| {
            let status = pod_status(testbed, pod)?;
            Ok((
                *pod,
                status["status"]["containerStatuses"][0]["restartCount"].clone(),
            ))
        })
        .collect::<Result<_>>()?;
    ensure!(
        restarts.values().all(|n| *n == 0),
        "containers restarted over the outage: {restarts:?}"
    );
    Ok(())
}
