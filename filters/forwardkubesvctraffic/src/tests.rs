//! YurtHub's forwardkubesvctraffic cases on kube-apiserver's JSON, for v1 and v1beta1.

use edgegate_filter_sdk::Resource;
use edgegate_filter_sdk::testing::Output;
use edgegate_filter_sdk::testing::{Harness, list_item};
use serde_json::{Value, json};

use super::*;

const SLICES: &str = include_str!("../fixtures/endpointslices.json");

fn slice(namespace: &str, name: &str) -> Value {
    list_item(SLICES, namespace, name)
}

fn ctx(version: &str) -> Context {
    Context::new(
        "kube-proxy",
        Verb::Watch,
        Resource::new("discovery.k8s.io", version, "endpointslices"),
    )
    .node_name("edge-1")
}

fn harness(config: Value) -> Harness<ForwardKubeSvcTraffic> {
    Harness::<ForwardKubeSvcTraffic>::configure(config).unwrap()
}

#[test]
fn the_kubernetes_slice_leads_to_the_hub() {
    let harness = harness(json!({}));
    let before = slice("default", "kubernetes");
    for version in ["v1", "v1beta1"] {
        let mut after = harness.filter(&ctx(version), &before).json().unwrap();
        assert_eq!(
            after["endpoints"],
            json!([{"addresses": ["169.254.2.1"], "conditions": {"ready": true}}])
        );
        assert_eq!(
            after["ports"],
            json!([{"name": "https", "protocol": "TCP", "port": 10268}])
        );
        // Nothing else moved, resourceVersion least of all.
        after["endpoints"] = before["endpoints"].clone();
        after["ports"] = before["ports"].clone();
        assert_eq!(after, before, "{version}");
    }
    assert_eq!(harness.counters().get("rewritten"), Some(&2));
}

#[test]
fn the_configured_hub_and_only_the_https_port() {
    let harness = harness(json!({"host": "10.0.0.254", "port": 20443}));
    let mut before = slice("default", "kubernetes");
    before["ports"] = json!([{"name": "https", "protocol": "TCP", "port": 6443},
                             {"name": "metrics", "protocol": "TCP", "port": 8443}]);
    let after = harness.filter(&ctx("v1"), &before).json().unwrap();
    assert_eq!(after["endpoints"][0]["addresses"], json!(["10.0.0.254"]));
    assert_eq!(after["ports"][0]["port"], 20443);
    assert_eq!(after["ports"][1], before["ports"][1]);
}

#[test]
fn other_slices_are_kept() {
    let harness = harness(json!({}));
    let mut elsewhere = slice("default", "kubernetes");
    elsewhere["metadata"]["namespace"] = json!("kube-system");
    let mut unlabelled = slice("default", "kubernetes");
    unlabelled["metadata"]["labels"] = json!({});
    for other in [
        slice("kube-system", "kube-dns-m5gq2"),
        elsewhere,
        unlabelled,
    ] {
        assert_eq!(harness.filter(&ctx("v1"), &other), Output::Keep);
    }
    let endpoints = Context::new(
        "kube-proxy",
        Verb::Watch,
        Resource::new("", "v1", "endpoints"),
    );
    assert_eq!(
        harness.filter(&endpoints, &slice("default", "kubernetes")),
        Output::Keep,
        "not a slice"
    );
    assert!(harness.counters().is_empty());
}

#[test]
fn a_rewritten_slice_is_kept_without_re_encoding() {
    let harness = harness(json!({}));
    let rewritten = harness
        .filter(&ctx("v1"), &slice("default", "kubernetes"))
        .json()
        .unwrap();
    assert_eq!(harness.filter(&ctx("v1"), &rewritten), Output::Keep);
}

#[test]
fn a_slice_of_the_other_address_family_is_left_alone() {
    let harness = harness(json!({"host": "fd00::254"}));
    assert_eq!(
        harness.filter(&ctx("v1"), &slice("default", "kubernetes")),
        Output::Keep
    );
    assert_eq!(harness.counters().get("address-type-mismatch"), Some(&1));
    let mut v6 = slice("default", "kubernetes");
    v6["addressType"] = json!("IPv6");
    let after = harness.filter(&ctx("v1"), &v6).json().unwrap();
    assert_eq!(after["endpoints"][0]["addresses"], json!(["fd00::254"]));
}

#[test]
fn bad_configs_are_refused_and_the_manifest_targets_kube_proxy() {
    assert!(Harness::<ForwardKubeSvcTraffic>::configure(json!({"host": ""})).is_err());
    let manifest = ForwardKubeSvcTraffic::manifest();
    assert_eq!(manifest.components, ["kube-proxy"]);
    assert_eq!(manifest.matches[0].group, "discovery.k8s.io");
    assert_eq!(manifest.matches[0].resources, ["endpointslices"]);
    assert_eq!(manifest.matches[0].verbs, [Verb::List, Verb::Watch]);
}
