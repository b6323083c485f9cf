//! Steps the node scenarios (`tests/node`) and `cargo dev --node --trials` share: pods and
//! hand-made endpoints in the cloud, what the node runs and programs, cutting the link and
//! timing what arrives after it is restored.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::Testbed;
use crate::process::wait_until;
use crate::testbed::NODE;

/// How long anything may take to arrive after the link is restored: a hang guard only.
pub const ARRIVAL_GUARD: Duration = Duration::from_secs(180);

/// A pod bound to the node (no scheduler runs) that sleeps in the busybox image.
pub fn pod(name: &str, host_network: bool) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "nodeName": NODE,
            "hostNetwork": host_network,
            "dnsPolicy": "Default",
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": "edgegate/busybox:test",
                "imagePullPolicy": "Never",
                "command": ["/bin/sleep", "100000"],
            }],
        },
    })
}

/// A Service without a selector (its endpoints are hand-made EndpointSlices), annotated
/// with `openyurt.io/topologyKeys: kubernetes.io/hostname` when `topology`.
pub fn service(name: &str, topology: bool) -> String {
    let annotations = if topology {
        serde_json::json!({"openyurt.io/topologyKeys": "kubernetes.io/hostname"})
    } else {
        serde_json::json!({})
    };
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    })
    .to_string()
}

/// A hand-made EndpointSlice `name` of `service`: ready `endpoints` as (address, node).
pub fn slice(service: &str, name: &str, endpoints: &[(&str, &str)]) -> String {
    let endpoints: Vec<_> = endpoints
        .iter()
        .map(|(ip, node)| {
            serde_json::json!({
                "addresses": [ip],
                "conditions": {"ready": true},
                "topology": {"kubernetes.io/hostname": node},
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1beta1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "edgegate-tests",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        "endpoints": endpoints,
    })
    .to_string()
}

/// The endpoints kube-proxy sends a Service's traffic to: the DNAT targets of its rules,
/// sorted.
pub fn destinations(rules: &[String], service: &str) -> Vec<String> {
    let comment = format!("default/{service}:http");
    let mut found: Vec<String> = rules
        .iter()
        .filter(|r| r.contains(&comment))
        .filter_map(|r| r.split("--to-destination ").nth(1))
        .map(|d| d.split(':').next().unwrap_or(d).to_owned())
        .collect();
    found.sort();
    found
}

/// Whether kube-proxy's rules send `service`'s traffic to exactly `ips` (sorted).
pub fn programs(testbed: &Testbed, service: &str, ips: &[String]) -> bool {
    testbed
        .node
        .proxy_rules()
        .is_ok_and(|rules| destinations(&rules, service) == ips)
}

/// Waits until kube-proxy sends `service`'s traffic to exactly `ips` (sorted).
pub fn wait_programs(testbed: &Testbed, service: &str, ips: &[String]) -> Result<()> {
    let what = format!("kube-proxy to send {service} to {ips:?}");
    let programmed = wait_until(Duration::from_secs(90), &what, || {
        programs(testbed, service, ips)
    });
    if let Err(error) = programmed {
        let now = destinations(&testbed.node.proxy_rules()?, service);
        return Err(error.context(format!("it sends it to {now:?}")));
    }
    Ok(())
}

/// Waits until containerd runs a container of each pod in `names`; pod → pid.
pub fn wait_pod_containers(
    testbed: &Testbed,
    names: &[&str],
) -> Result<std::collections::BTreeMap<String, u32>> {
    let mut found = Default::default();
    wait_until(
        Duration::from_secs(120),
        "the pods' containers to run",
        || {
            testbed.node.containerd.pod_containers().is_ok_and(|pods| {
                let all = names.iter().all(|name| pods.contains_key(*name));
                found = pods;
                all
            })
        },
    )
    .with_context(|| testbed.node.log_tail("kubelet", 30))?;
    Ok(found)
}

/// Waits until the gateway's `/v1/readyz` says it serves from its cache (`offline`) or
/// answers 200.
pub fn wait_readyz(testbed: &Testbed, offline: bool) -> Result<()> {
    let what = if offline {
        "the gateway to serve from its cache"
    } else {
        "the gateway to be ready"
    };
    wait_until(Duration::from_secs(60), what, || {
        testbed.node.hub("/v1/readyz").is_ok_and(|(status, body)| {
            if offline {
                status == 503 && body.contains("serving the node's components from the local cache")
            } else {
                status == 200
            }
        })
    })
}

/// Waits until kubelet has finished deleting pod `namespace/name` in the cloud (a pod
/// deleted there stays, terminating, until its node's kubelet confirms it stopped: at its
/// own pace, over a minute at times), then until the pod is gone from kubelet's cache on
/// the node; returns the time from the one to the other.
pub fn wait_gone_from_cache(testbed: &Testbed, namespace: &str, name: &str) -> Result<Duration> {
    wait_until(ARRIVAL_GUARD, "kubelet to finish deleting the pod", || {
        testbed
            .cloud
            .kubectl(&[
                "get",
                "pod",
                name,
                "-n",
                namespace,
                "--ignore-not-found",
                "-o",
                "name",
            ])
            .is_ok_and(|out| out.trim().is_empty())
    })?;
    let gone = Instant::now();
    let path = format!("/v1/cache/object?component=kubelet&resource=pods&name={namespace}/{name}");
    wait_until(
        ARRIVAL_GUARD,
        "the deleted pod to leave kubelet's cache",
        || {
            testbed
                .node
                .hub(&path)
                .is_ok_and(|(status, _)| status == 404)
        },
    )?;
    Ok(gone.elapsed())
}

/// Cuts the link unless it is cut, and waits until the gateway serves from its cache.
pub fn ensure_cut(testbed: &mut Testbed) -> Result<()> {
    if !testbed.link.is_cut() {
        testbed.link.cut()?;
    }
    wait_readyz(testbed, true)
}

/// Something awaited after the link's return: what it is, and a check that it arrived.
pub type Arrival<'a> = (&'a str, &'a mut dyn FnMut(&Testbed) -> bool);

/// Restores the link and waits until each of `arrivals` (what, check) holds, each within
/// [`ARRIVAL_GUARD`]; the time from the link's return to each, in order.
pub fn restore_and_time(
    testbed: &mut Testbed,
    arrivals: &mut [Arrival<'_>],
) -> Result<Vec<Duration>> {
    testbed.link.restore()?;
    time_arrivals(testbed, Instant::now(), arrivals)
}

/// Waits until each of `arrivals` (what, check) holds, each within [`ARRIVAL_GUARD`] of
/// `restored` (the link's return); the time from `restored` to each, in order.
pub fn time_arrivals(
    testbed: &Testbed,
    restored: Instant,
    arrivals: &mut [Arrival<'_>],
) -> Result<Vec<Duration>> {
    let mut times: Vec<Option<Duration>> = vec![None; arrivals.len()];
    while times.iter().any(Option::is_none) {
        for ((_, arrived), time) in arrivals.iter_mut().zip(&mut times) {
            if time.is_none() && arrived(testbed) {
                *time = Some(restored.elapsed());
            }
        }
        if restored.elapsed() > ARRIVAL_GUARD {
            let missing: Vec<&str> = arrivals
                .iter()
                .zip(&times)
                .filter(|(_, time)| time.is_none())
                .map(|((what, _), _)| *what)
                .collect();
            bail!(
                "timed out after {ARRIVAL_GUARD:?} after the link's return waiting for {missing:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(times.into_iter().flatten().collect())
}

/// The times one reconnect took: from the link's return to a pod deleted during the cut
/// stopped, and to kube-proxy's rules carrying a Service's moved endpoints.
#[derive(Clone, Copy, Debug)]
pub struct ReconnectTimes {
    /// Link restored → the deleted pod's container stopped.
    pub pod_stopped: Duration,
    /// Link restored → kube-proxy's rules updated for the moved endpoints.
    pub rules_updated: Duration,
}

/// With `pod` running on the node and the link up or cut: cuts the link, deletes `pod` and
/// moves `service`'s endpoints (its only slice, `slice_name`) to `to` in the cloud, then
/// restores the link and times both arriving.
pub fn reconnect(
    testbed: &mut Testbed,
    pod: &str,
    (service, slice_name): (&str, &str),
    to: &str,
) -> Result<ReconnectTimes> {
    ensure_cut(testbed)?;
    let cluster = &testbed.cloud.cluster;
    cluster.kubectl(&["delete", "pod", pod, "-n", "default", "--wait=false"])?;
    cluster.apply(&slice(service, slice_name, &[(to, NODE)]))?;
    let running = |testbed: &Testbed| {
        testbed
            .node
            .containerd
            .pod_containers()
            .map(|pods| pods.contains_key(pod))
    };
    if !running(testbed)? {
        let log = testbed.node.log("kubelet");
        let about: Vec<&str> = log.lines().filter(|l| l.contains(pod)).collect();
        bail!(
            "{pod}'s container is not running while cut; kubelet on it:\n{}",
            about[about.len().saturating_sub(20)..].join("\n")
        );
    }
    let moved = [to.to_owned()];
    let times = restore_and_time(
        testbed,
        &mut [
            ("the deleted pod's container to stop", &mut |t: &Testbed| {
                running(t).is_ok_and(|running| !running)
            }),
            (
                "kube-proxy's rules to carry the moved endpoints",
                &mut |t: &Testbed| programs(t, service, &moved),
            ),
        ],
    )?;
    Ok(ReconnectTimes {
        pod_stopped: times[0],
        rules_updated: times[1],
    })
}
