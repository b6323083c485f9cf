//! Offline, the endpoints of the node's own pods follow what kubelet writes of them: a pod
//! that comes back at a new address (a reboot while cut) or turns not ready is what
//! kube-proxy's EndpointSlices and coredns' Endpoints say, read and watched; endpoints of
//! another node's pods are left as the cloud sent them.

use std::time::Duration;

use anyhow::{Context, Result, ensure};

use crate::own_node::OwnNode;
use crate::own_writes::{read, read_as, rv, write};
use crate::support::{Env, Watch, apply, client, list_as, runtime, wait_readyz, wait_sets};

const KUBE_PROXY: &str = "kube-proxy/v1.20.2 (linux/amd64) kubernetes/faecb19";
const COREDNS: &str = "coredns/1.7.0 (linux/amd64) kubernetes/faecb19";

/// A strategic-merge patch of a pod's status as kubelet sends it: its address and `Ready`.
fn status_patch(ip: &str, ready: bool) -> String {
    let ready = if ready { "True" } else { "False" };
    format!(
        r#"{{"status":{{"$setElementOrder/conditions":[{{"type":"Ready"}}],"conditions":[{{"type":"Ready","status":"{ready}"}}],"podIP":"{ip}","podIPs":[{{"ip":"{ip}"}}],"phase":"Running"}}}}"#
    )
}

/// The Endpoints' address naming pod `name`, and the list it is in.
fn address_of<'a>(
    endpoints: &'a serde_json::Value,
    name: &str,
) -> Option<(&'a str, &'a serde_json::Value)> {
    ["addresses", "notReadyAddresses"]
        .into_iter()
        .find_map(|list| {
            endpoints["subsets"][0][list]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["targetRef"]["name"] == name)
                .map(|a| (list, a))
        })
}

/// Offline, kubelet's status patches of a pod on the node (a new address, then not ready)
/// reach the cached EndpointSlice kube-proxy reads and the Endpoints coredns reads: each
/// GET shows them, kube-proxy's offline watch gets the slice as MODIFIED, and the endpoint
/// of a pod on another node keeps what the cloud sent.
pub fn offline_endpoints_follow_the_nodes_pods(env: &Env) -> Result<()> {
    follow(env, false)
}

/// As [`offline_endpoints_follow_the_nodes_pods`], with EndpointSlices pool-scope:
/// kube-proxy's list and watch are the multiplexer's, whose shared state takes the change.
pub fn offline_endpoints_follow_the_nodes_pods_in_the_multiplexer(env: &Env) -> Result<()> {
    follow(env, true)
}

fn follow(env: &Env, multiplexed: bool) -> Result<()> {
    // The test cluster is Kubernetes 1.20: its EndpointSlices are `v1beta1` (the default
    // names `v1`'s, so without this kube-proxy's pass the multiplexer by).
    let pool_scope = "--pool-scope-resources=/v1/services,discovery.k8s.io/v1beta1/endpointslices";
    let extra: &[&str] = if multiplexed { &[pool_scope] } else { &[] };
    let OwnNode {
        node,
        ns,
        relay,
        gateway,
    } = OwnNode::start(env, "ep", extra)?;
    let target = |pod: &str| format!(r#"{{"kind":"Pod","namespace":"{ns}","name":"{pod}"}}"#);
    let manifests = [
        (
            "node.json",
            format!(r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{node}"}}}}"#),
        ),
        (
            "pod.json",
            format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"web","namespace":"{ns}"}},"spec":{{"nodeName":"{node}","containers":[{{"name":"web","image":"registry.invalid/web:1"}}]}}}}"#
            ),
        ),
        (
            "service.json",
            format!(
                r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"web","namespace":"{ns}"}},"spec":{{"ports":[{{"port":80}}]}}}}"#
            ),
        ),
        (
            "endpoints.json",
            format!(
                r#"{{"apiVersion":"v1","kind":"Endpoints","metadata":{{"name":"web","namespace":"{ns}","labels":{{"endpointslice.kubernetes.io/skip-mirror":"true"}}}},"subsets":[{{"addresses":[{{"ip":"198.18.7.5","nodeName":"{node}","targetRef":{}}},{{"ip":"198.18.8.5","nodeName":"{node}-other","targetRef":{}}}],"ports":[{{"port":80,"protocol":"TCP"}}]}}]}}"#,
                target("web"),
                target("other")
            ),
        ),
        (
            "slice.json",
            format!(
                r#"{{"apiVersion":"discovery.k8s.io/v1beta1","kind":"EndpointSlice","metadata":{{"name":"web-edge","namespace":"{ns}","labels":{{"kubernetes.io/service-name":"web","endpointslice.kubernetes.io/managed-by":"e2e.edgegate.test"}}}},"addressType":"IPv4","endpoints":[{{"addresses":["198.18.7.5"],"conditions":{{"ready":true}},"topology":{{"kubernetes.io/hostname":"{node}"}},"targetRef":{}}},{{"addresses":["198.18.8.5"],"conditions":{{"ready":true}},"topology":{{"kubernetes.io/hostname":"{node}-other"}},"targetRef":{}}}],"ports":[{{"name":"","port":80,"protocol":"TCP"}}]}}"#,
                target("web"),
                target("other")
            ),
        ),
    ];
    for (name, manifest) in &manifests {
        apply(&env.cluster, &gateway.dir, name, manifest)?;
    }
    let rt = runtime();
    let client = client();
    let base = gateway.url();
    let pod_url = format!("{base}/api/v1/namespaces/{ns}/pods/web");
    let slices_url = format!("{base}/apis/discovery.k8s.io/v1beta1/endpointslices");
    let slice_url =
        format!("{base}/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices/web-edge");
    let endpoints_url = format!("{base}/api/v1/namespaces/{ns}/endpoints/web");
    // Online: kubelet reports the pod ready at the address the endpoints name.
    let (status, online) = rt.block_on(write(
        &client,
        http::Method::PATCH,
        &format!("{pod_url}/status"),
        "application/strategic-merge-patch+json",
        &status_patch("198.18.7.5", true),
    ))?;
    ensure!(status == 200, "the online status patch: {status} {online}");
    rt.block_on(read(&client, &pod_url))?;
    // As kube-proxy's reflector lists (from any version: the multiplexer's state, once its
    // feed saw the slice).
    let mut listed = None;
    for _ in 0..40 {
        let url = format!("{slices_url}?resourceVersion=0");
        let (version, slices) = rt.block_on(list_as(&client, &url, KUBE_PROXY))?;
        if slices.iter().any(|s| s["metadata"]["name"] == "web-edge") {
            listed = Some(version);
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let slices_rv = listed.context("kube-proxy's list never showed the slice")?;
    rt.block_on(list_as(
        &client,
        &format!("{base}/api/v1/endpoints"),
        COREDNS,
    ))?;
    let slice_before = rt.block_on(read_as(&client, &slice_url, KUBE_PROXY))?;
    let endpoints_before = rt.block_on(read_as(&client, &endpoints_url, COREDNS))?;
    // The multiplexer's feed caches the shared sets for component `edgegate`.
    wait_sets(
        gateway.hub,
        if multiplexed {
            "edgegate"
        } else {
            "kube-proxy"
        },
        1,
    )?;
    if multiplexed {
        let served = crate::support::metric(gateway.hub, "edgegate_multiplexer_answers_total")?;
        ensure!(served >= 1.0, "the multiplexer answers kube-proxy's list");
    }
    wait_sets(gateway.hub, "coredns", 1)?;

    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;
    let mut watch = rt.block_on(Watch::open(
        &client,
        &format!("{slices_url}?watch=true&resourceVersion={slices_rv}"),
        KUBE_PROXY,
    ))?;
    // The node rebooted while cut: its pod is back at another address.
    let (status, moved) = rt.block_on(write(
        &client,
        http::Method::PATCH,
        &format!("{pod_url}/status"),
        "application/strategic-merge-patch+json",
        &status_patch("198.18.7.77", true),
    ))?;
    ensure!(status == 200, "the offline status patch: {status} {moved}");
    let event = rt
        .block_on(watch.wait_for("MODIFIED", "web-edge", Duration::from_secs(20)))
        .with_context(|| gateway.log_tail(60))?;
    let watched = &event["object"];
    ensure!(
        watched["endpoints"][0]["addresses"] == serde_json::json!(["198.18.7.77"])
            && watched["endpoints"][0]["conditions"]["ready"] == true,
        "kube-proxy's offline watch gets the pod's new address: {watched}"
    );
    let slice = rt.block_on(read_as(&client, &slice_url, KUBE_PROXY))?;
    ensure!(
        slice == *watched,
        "a GET shows what the watch sent:\n{slice}\nvs\n{watched}"
    );
    ensure!(
        slice["endpoints"][1] == slice_before["endpoints"][1],
        "another node's endpoint is left as it was: {slice}"
    );
    ensure!(
        rv(&slice) > rv(&slice_before),
        "the followed slice is newer: {slice}"
    );
    let endpoints = rt.block_on(read_as(&client, &endpoints_url, COREDNS))?;
    let web = address_of(&endpoints, "web");
    ensure!(
        web.is_some_and(|(list, a)| list == "addresses" && a["ip"] == "198.18.7.77"),
        "coredns' Endpoints name the new address: {endpoints}"
    );
    ensure!(
        address_of(&endpoints, "other") == address_of(&endpoints_before, "other"),
        "another node's address is left as it was: {endpoints}"
    );

    // The pod's readiness probe fails: its endpoints are not ready any more.
    let (status, down) = rt.block_on(write(
        &client,
        http::Method::PATCH,
        &format!("{pod_url}/status"),
        "application/strategic-merge-patch+json",
        &status_patch("198.18.7.77", false),
    ))?;
    ensure!(status == 200, "the not-ready patch: {status} {down}");
    let event = rt
        .block_on(watch.wait_for("MODIFIED", "web-edge", Duration::from_secs(20)))
        .with_context(|| gateway.log_tail(60))?;
    ensure!(
        event["object"]["endpoints"][0]["conditions"]["ready"] == false,
        "kube-proxy's offline watch gets the endpoint not ready: {event}"
    );
    let slice = rt.block_on(read_as(&client, &slice_url, KUBE_PROXY))?;
    ensure!(
        slice["endpoints"][0]["conditions"]["ready"] == false
            && slice["endpoints"][1] == slice_before["endpoints"][1],
        "a GET shows the endpoint not ready, the other one as it was: {slice}"
    );
    let endpoints = rt.block_on(read_as(&client, &endpoints_url, COREDNS))?;
    ensure!(
        address_of(&endpoints, "web")
            .is_some_and(|(list, a)| list == "notReadyAddresses" && a["ip"] == "198.18.7.77")
            && address_of(&endpoints, "other") == address_of(&endpoints_before, "other"),
        "coredns' Endpoints hold the address as not ready: {endpoints}"
    );
    Ok(())
}
