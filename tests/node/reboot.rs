//! (d, e) The node's own failures while cut: edgegate killed and started again, and the
//! whole node powered off for longer than `--cache-gc-after` and booted without the cloud.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::Testbed;
use edgegate_testkit::process::wait_until;
use edgegate_testkit::scenario::{destinations, programs, wait_pod_containers, wait_programs};
use edgegate_testkit::served;

use crate::outage::{KEPT, WRITE_ERRORS};
use crate::support::{
    cache_endpoints_as_coredns, cached_sets, ensure_cut, ensure_kubelet_logged_none,
    ensure_pods_and_rules_kept, pod_status, pod_tasks, requests, wait_pods_running, wait_readyz,
    wait_requests,
};

/// How long the node stays off: longer than the [`GC_AFTER`] it boots with.
const OFF: Duration = Duration::from_secs(15);

/// The gateway's `--cache-gc-after` when the node boots after [`OFF`].
const GC_AFTER: &str = "--cache-gc-after=10s";

/// (d) Still cut: edgegate killed (SIGKILL) and started again serves the node from its
/// store: the pods keep their containers, kubelet's writes are answered again (3 lease
/// renewals, no write error logged after the first), kube-proxy's rules stay as they were.
/// Leaves the link cut.
pub fn an_edgegate_killed_while_cut_serves_the_node_again(testbed: &mut Testbed) -> Result<()> {
    let ids = wait_pods_running(testbed, KEPT)?;
    ensure_cut(testbed)?;
    let tasks = pod_tasks(testbed, &ids)?;
    let rules = testbed.node.proxy_rules()?;

    testbed.node.kill_gateway();
    testbed.node.start_gateway()?;
    wait_readyz(testbed, true)?;
    // Its counters start from zero again; the writes kubelet had in flight at the kill, or
    // made while no gateway listened, failed (and kubelet said so).
    let lease = ("kubelet", "update", "leases");
    wait_requests(testbed, lease, 0.0, 1.0, Duration::from_secs(60))?;
    let offset = testbed.node.log("kubelet").len();
    let leases = requests(testbed, "kubelet", "update", "leases")?;
    wait_requests(testbed, lease, leases, 3.0, Duration::from_secs(90))?;

    testbed.node.check_running()?;
    ensure_pods_and_rules_kept(testbed, &ids, &tasks, &rules, "over edgegate's restart")?;
    let log = testbed.node.log("kubelet");
    ensure_kubelet_logged_none(
        &log[offset..],
        WRITE_ERRORS,
        "write errors after edgegate's restart",
    )?;
    Ok(())
}

/// (d, e) Cut, the node is powered off (every process killed, containerd with its shims
/// and containers, kube-proxy's chains gone) for longer than `--cache-gc-after`, and boots
/// still cut with a gateway that collects after 10 s: nothing is collected (every cached
/// set is still there), the pods run again (new containers, from the cache), kubelet's node
/// registration is answered. The bridge pod's new sandbox has a new address (host-local
/// keeps the old one reserved on disk): the pod read through edgegate shows it and `Ready`,
/// so do its Service's EndpointSlices (kube-proxy's) and Endpoints
/// (CoreDNS's, listed while the link was up), kube-proxy sends the Service there, and the node
/// reaches the ClusterIP again; kube-proxy's other rules come back as they were, and kubelet
/// logs no write refused. Then the link is restored: the node is Ready and kube-proxy keeps
/// the new address. Leaves the link up; later starts of the gateway
/// get its usual flags.
pub fn a_node_powered_off_longer_than_gc_after_boots_on_its_cache(
    testbed: &mut Testbed,
) -> Result<()> {
    wait_pods_running(testbed, KEPT)?;
    if testbed.link.is_cut() {
        testbed.link.restore()?;
        wait_readyz(testbed, false)?;
    }
    cache_endpoints_as_coredns(testbed)?;
    ensure_cut(testbed)?;
    let rules = testbed.node.proxy_rules()?;
    let before = wait_pod_containers(testbed, KEPT)?;
    let sets = cached_sets(testbed)?;
    let old_ip = pod_status(testbed, served::BACKEND)?["status"]["podIP"]
        .as_str()
        .context("the bridge pod has no IP")?
        .to_owned();
    let cluster_ip = served::cluster_ip(testbed)?;
    served::wait_answers(testbed, &cluster_ip, Duration::from_secs(30))
        .context("the node does not reach the Service before the power-off")?;
    // kube-proxy's Services and EndpointSlices are the multiplexer's shared sets.
    ensure!(
        [
            "kubelet ",
            "edgegate services.v1.core ",
            "edgegate endpointslices.v1beta1.discovery.k8s.io ",
        ]
        .iter()
        .all(|c| sets.iter().any(|set| set.starts_with(c))),
        "kubelet's or kube-proxy's sets are not cached: {sets:?}"
    );

    testbed.node.power_off()?;
    ensure!(
        testbed.node.proxy_rules()? != rules,
        "the power-off left kube-proxy's rules in place"
    );
    // Not an assertion on time: the node must stay off for longer than GC_AFTER.
    std::thread::sleep(OFF);
    testbed.node.set_gateway_flags(&[GC_AFTER]);
    let offset = testbed.node.log("kubelet").len();
    let booted = testbed.node.power_on();
    testbed.node.set_gateway_flags(&[]);
    booted?;
    wait_readyz(testbed, true)?;

    let after = wait_pod_containers(testbed, KEPT)?;
    for pod in KEPT {
        ensure!(
            before.get(*pod) != after.get(*pod),
            "{pod} runs the same process as before the power-off: {before:?}"
        );
    }
    let running = Instant::now();
    let new_ip = served::new_address(testbed, &old_ip)?;
    wait_programs(testbed, served::SERVED, std::slice::from_ref(&new_ip))
        .with_context(|| testbed.node.log_tail("edgegate", 40))?;
    let took = served::wait_answers(testbed, &cluster_ip, Duration::from_secs(90))?;
    eprintln!(
        "the ClusterIP answered {:?} after the pods ran again ({took:?} after the new address was read)",
        running.elapsed()
    );
    let slices = served::read_through_gateway(testbed, served::KUBE_PROXY, &served::slices_path())?;
    ensure!(
        served::backend_addresses(&slices) == [(new_ip.clone(), true)],
        "the Service's EndpointSlices read through edgegate name {:?}, not {new_ip} ready",
        served::backend_addresses(&slices)
    );
    let endpoints = served::read_through_gateway(
        testbed,
        served::COREDNS,
        &served::endpoints_path(served::SERVED),
    )?;
    let addresses = served::endpoints_addresses_of(&endpoints, served::BACKEND);
    ensure!(
        addresses == [(new_ip.clone(), true)],
        "the Service's Endpoints read through edgegate as CoreDNS name {addresses:?}, not {new_ip} ready"
    );
    let apart = served::rules_apart_from_served(&rules);
    wait_until(
        Duration::from_secs(90),
        "kube-proxy's other rules to come back",
        || {
            testbed
                .node
                .proxy_rules()
                .is_ok_and(|now| served::rules_apart_from_served(&now) == apart)
        },
    )
    .with_context(|| testbed.node.log_tail("kube-proxy", 20))?;
    let log = testbed.node.log("kubelet");
    for (patterns, what) in [
        (WRITE_ERRORS, "write errors after the offline boot"),
        (
            STATUS_REFUSED,
            "pod status writes refused after the offline boot",
        ),
    ] {
        ensure_kubelet_logged_none(&log[offset..], patterns, what)?;
    }
    wait_until(
        Duration::from_secs(60),
        "kubelet's node registration to be answered",
        || testbed.node.log("kubelet")[offset..].contains("Successfully registered node"),
    )
    .with_context(|| testbed.node.log_tail("kubelet", 30))?;
    let now = cached_sets(testbed)?;
    let lost: Vec<&String> = sets.difference(&now).collect();
    ensure!(
        lost.is_empty(),
        "the store lost sets over the power-off: {lost:?}"
    );
    let (_, metrics) = testbed.node.hub("/metrics")?;
    let collected = metrics
        .lines()
        .find(|l| l.starts_with("edgegate_cache_collected_components_total"))
        .context("no edgegate_cache_collected_components_total")?;
    ensure!(
        collected.ends_with(" 0"),
        "the gateway collected caches after the power-off: {collected}"
    );
    testbed.node.check_running()?;

    testbed.link.restore()?;
    let restored = Instant::now();
    wait_readyz(testbed, false)?;
    testbed.node.wait_ready(&testbed.cloud)?;
    // kubelet's resumed pod watch is answered 410 Expired (it wrote in that set while cut):
    // it lists the cloud's pod, finds its status missing and writes it again. Meanwhile,
    // and after, kube-proxy keeps sending to the new address: nothing flaps.
    let mut flapped = Vec::new();
    wait_until(
        Duration::from_secs(90),
        "the cloud to have the bridge pod at its new address",
        || {
            note_flap(testbed, &new_ip, restored, &mut flapped);
            pod_status(testbed, served::BACKEND)
                .is_ok_and(|pod| pod["status"]["podIP"] == new_ip.as_str())
        },
    )
    .with_context(|| testbed.node.log_tail("edgegate", 30))?;
    let learned = restored.elapsed();
    wait_until(
        Duration::from_secs(90),
        "the cloud's EndpointSlices to name the new address",
        || {
            note_flap(testbed, &new_ip, restored, &mut flapped);
            served::cloud_slices(testbed)
                .is_ok_and(|slices| served::backend_addresses(&slices) == [(new_ip.clone(), true)])
        },
    )?;
    eprintln!(
        "after the reconnect the cloud had the bridge pod at {new_ip} in {learned:?}, its EndpointSlices in {:?}",
        restored.elapsed()
    );
    ensure!(
        flapped.is_empty() && programs(testbed, served::SERVED, std::slice::from_ref(&new_ip)),
        "kube-proxy did not send {} to {new_ip} alone after the reconnect (at, sent to): {flapped:?}",
        served::SERVED
    );
    let log = testbed.node.log("kubelet");
    ensure_kubelet_logged_none(&log[offset..], STATUS_REFUSED, "pod status writes refused")?;
    Ok(())
}

/// Notes, with the time since `restored`, where kube-proxy sends the Service if not to
/// `new_ip` alone. A read of the rules that fails (`iptables-save` while kube-proxy
/// restores its table) is no such time: the next poll reads them again.
fn note_flap(
    testbed: &Testbed,
    new_ip: &str,
    restored: Instant,
    flapped: &mut Vec<(Duration, Vec<String>)>,
) {
    if let Ok(rules) = testbed.node.proxy_rules() {
        let sent = destinations(&rules, served::SERVED);
        if sent != [new_ip] {
            flapped.push((restored.elapsed(), sent));
        }
    }
}

/// What kubelet logs when a write of a pod's status is refused or conflicts.
const STATUS_REFUSED: &[&str] = &[
    "Failed to update status for pod",
    "the object has been modified",
];
