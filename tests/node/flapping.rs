//! A flapping link on the real node: the node's link goes down and up, every 2 s and then at
//! random intervals, while kubelet, kube-proxy and 200 kube-rs reflectors (four components)
//! watch through edgegate and the cloud churns.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::flapping::cloud::{self, Plain};
use edgegate_testkit::flapping::{AGENTS, Reflectors, SETTLED_WITHIN, Usage, flap, flapping_for};
use edgegate_testkit::node::GATEWAY_URL;
use edgegate_testkit::process::wait_until;
use edgegate_testkit::scenario::{destinations, service, slice, time_arrivals};
use edgegate_testkit::testbed::NODE;
use edgegate_testkit::{ADMIN_TOKEN, Gateway, Testbed};

use crate::outage::KEPT;
use crate::support::{apply, pod_tasks, wait_pods_running, wait_readyz};

const REFLECTORS: usize = 200;
/// The namespace the reflectors watch.
const NAMESPACE: &str = "flap";
/// Services of `default` (`flap-0`…) whose only endpoint the cloud moves while the link
/// flaps, for kube-proxy to follow.
const MOVING: usize = 5;

/// The address the `n`th move sends a moving Service to.
fn address(n: u64) -> String {
    format!("198.19.126.{}", n % 250 + 1)
}

/// Moves the endpoint of one of the [`MOVING`] Services a second, in turn, through `admin`
/// until `stop`; each Service's last address goes into `moved`. The number of moves.
async fn move_endpoints(
    client: Plain,
    admin: String,
    stop: Arc<AtomicBool>,
    moved: Arc<Mutex<BTreeMap<String, String>>>,
) -> Result<u64> {
    let mut moves = 0u64;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while !stop.load(Ordering::SeqCst) {
        tick.tick().await;
        let name = format!("flap-{}", moves % MOVING as u64);
        let ip = address(moves + MOVING as u64);
        let url = format!(
            "{admin}/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices/{name}"
        );
        let body = format!(
            r#"{{"endpoints":[{{"addresses":["{ip}"],"conditions":{{"ready":true}},"topology":{{"kubernetes.io/hostname":"{NODE}"}}}}]}}"#
        );
        let (status, answer) = cloud::send(&client, http::Method::PATCH, &url, Some(&body)).await?;
        ensure!(
            status.is_success(),
            "{url}: {status} {}",
            String::from_utf8_lossy(&answer)
        );
        moved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name, ip);
        moves += 1;
    }
    Ok(moves)
}

/// Whether kube-proxy sends each moving Service's traffic to its address in `moved`.
fn rules_follow(testbed: &Testbed, moved: &BTreeMap<String, String>) -> bool {
    testbed.node.proxy_rules().is_ok_and(|rules| {
        moved
            .iter()
            .all(|(name, ip)| destinations(&rules, name) == [ip.clone()])
    })
}

/// The node's Lease's `renewTime`, as the cloud has it.
fn lease_renewed(testbed: &Testbed) -> Result<String> {
    testbed.cloud.kubectl(&[
        "get",
        "lease",
        NODE,
        "-n",
        "kube-node-lease",
        "-o",
        "jsonpath={.spec.renewTime}",
    ])
}

/// With the gateway caching four more components, 200 reflectors (ConfigMaps and Services
/// of one namespace) watch through it from inside the node, beside kubelet and kube-proxy,
/// while the node's link is cut and restored every 2 s, then at random intervals, for 40 s
/// (`EDGEGATE_FLAP_SECONDS`), and the cloud changes 20 of their objects a second and moves
/// the endpoint of one of five Services a second. After the last restore: every reflector's
/// store equals the cloud's, resourceVersion by resourceVersion, and none saw one go back;
/// kube-proxy sends each Service to its last endpoint; kubelet renews its Lease in the cloud
/// and the node is Ready; the pods run the same processes as before; the gateway's file
/// descriptors, threads, RSS and tasks come back within a margin. Prints the figures. Leaves the
/// link up, and the gateway running with the four components cached until its next start.
pub fn the_node_rides_a_flapping_link(testbed: &mut Testbed) -> Result<()> {
    if testbed.link.is_cut() {
        testbed.link.restore()?;
    }
    let ids = wait_pods_running(testbed, KEPT)?;
    let tasks = pod_tasks(testbed, &ids)?;
    let agents = format!("--cache-agents={}", AGENTS.join(","));
    testbed.node.set_gateway_flags(&[&agents]);
    testbed.node.stop_gateway();
    let started = testbed.node.start_gateway();
    testbed.node.set_gateway_flags(&[]);
    started?;
    wait_readyz(testbed, false)?;

    let cluster = &testbed.cloud.cluster;
    cluster.kubectl(&["create", "namespace", NAMESPACE])?;
    let admin = Gateway::start(Path::new(env!("CARGO_BIN_EXE_edgegate")), cluster, &[])?;
    let moved = Arc::new(Mutex::new(BTreeMap::new()));
    for i in 0..MOVING as u64 {
        let name = format!("flap-{i}");
        apply(testbed, &service(&name, false))?;
        apply(testbed, &slice(&name, &name, &[(&address(i), NODE)]))?;
        moved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name, address(i));
    }
    let host = cloud::runtime()?;
    let client = cloud::plain();
    host.block_on(cloud::seed(&client, &admin.url(), NAMESPACE))?;
    let node = testbed.link.runtime()?;
    let reflectors =
        Reflectors::spawn(&node, GATEWAY_URL, Some(ADMIN_TOKEN), NAMESPACE, REFLECTORS)?;
    reflectors.wait_listed(Duration::from_secs(120))?;
    wait_until(
        Duration::from_secs(90),
        "kube-proxy to program the moving Services",
        || rules_follow(testbed, &moved.lock().unwrap_or_else(|p| p.into_inner())),
    )?;
    std::thread::sleep(Duration::from_secs(2));
    let pid = testbed.node.pid("edgegate").context("edgegate runs")?;
    let before = Usage::of(pid, &|| Ok(testbed.node.hub("/metrics")?.1))?;

    let stop = Arc::new(AtomicBool::new(false));
    let churn = host.spawn(cloud::churn(
        client.clone(),
        admin.url(),
        NAMESPACE.to_owned(),
        stop.clone(),
    ));
    let moves = host.spawn(move_endpoints(
        client.clone(),
        admin.url(),
        stop.clone(),
        moved.clone(),
    ));
    let flapping = flapping_for(40);
    let mut restored = Instant::now();
    let cuts = flap(flapping, |up| {
        if up {
            testbed.link.restore()?;
            restored = Instant::now();
            Ok(())
        } else {
            testbed.link.cut()
        }
    });
    stop.store(true, Ordering::SeqCst);
    let lease = lease_renewed(testbed)?;
    let (cuts, changes, moves) = (cuts?, host.block_on(churn)??, host.block_on(moves)??);

    let truth = host.block_on(cloud::truth(&client, &admin.url(), NAMESPACE))?;
    let moved = moved.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let times = time_arrivals(
        testbed,
        restored,
        &mut [
            (
                "every reflector's store to equal the cloud",
                &mut |_: &Testbed| reflectors.match_cloud(&truth),
            ),
            (
                "kube-proxy to follow the moved endpoints",
                &mut |t: &Testbed| rules_follow(t, &moved),
            ),
            (
                "kubelet to renew its Lease in the cloud",
                &mut |t: &Testbed| lease_renewed(t).is_ok_and(|now| now != lease),
            ),
        ],
    )
    .with_context(|| {
        let rules = testbed.node.proxy_rules().unwrap_or_default();
        let now: BTreeMap<&String, Vec<String>> = moved
            .keys()
            .map(|name| (name, destinations(&rules, name)))
            .collect();
        format!(
            "{}; the moving Services in the cloud: {moved:?}, in kube-proxy's rules: {now:?}",
            reflectors.differences(&truth)
        )
    })?;
    let backwards = reflectors.backwards();
    ensure!(
        backwards.is_empty(),
        "{} object(s) seen going back in resourceVersion, e.g. {:?}",
        backwards.len(),
        &backwards[..backwards.len().min(5)]
    );
    testbed.node.wait_ready(&testbed.cloud)?;
    testbed.node.check_running()?;
    ensure!(
        pod_tasks(testbed, &ids)? == tasks,
        "the pods' containers changed over the flapping: before {tasks:?}"
    );
    // Measured with the reflectors still watching, as before the flapping.
    let (after, settling) = Usage::settle(
        pid,
        &|| Ok(testbed.node.hub("/metrics")?.1),
        &before,
        SETTLED_WITHIN,
    )?;
    println!(
        "{cuts} cuts in {flapping:?}, {changes} changes and {moves} endpoint moves in the cloud, {REFLECTORS} reflectors ({} lists); after the last restore: every store equal to the cloud at {:.1?}, kube-proxy's rules at {:.1?}, the Lease renewed at {:.1?}; no resourceVersion backwards, the pods' processes kept; gateway before → after: {before} → {after} ({settling:.1?} later)",
        reflectors.relists(),
        times[0],
        times[1],
        times[2]
    );
    drop(reflectors);
    drop(admin);
    for i in 0..MOVING {
        testbed
            .cloud
            .kubectl(&["delete", "service", &format!("flap-{i}"), "-n", "default"])?;
    }
    testbed
        .cloud
        .kubectl(&["delete", "namespace", NAMESPACE, "--wait=false"])?;
    Ok(())
}
