//! YurtHub's masterservice cases on kube-apiserver's JSON: only `default/kubernetes`, only
//! its `https` port, and nothing re-encoded when nothing changes.

use edgegate_filter_sdk::Resource;
use edgegate_filter_sdk::testing::Output;
use edgegate_filter_sdk::testing::{Harness, list_item};
use serde_json::{Value, json};

use super::*;

const SERVICES: &str = include_str!("../fixtures/services.json");

fn service(namespace: &str, name: &str) -> Value {
    list_item(SERVICES, namespace, name)
}

fn ctx() -> Context {
    Context::new("kubelet", Verb::Watch, Resource::new("", "v1", "services")).node_name("edge-1")
}

#[test]
fn the_kubernetes_service_points_at_the_default_hub() {
    let harness = Harness::<MasterService>::configure(json!({})).unwrap();
    let before = service("default", "kubernetes");
    let mut after = harness.filter(&ctx(), &before).json().unwrap();
    assert_eq!(after["spec"]["clusterIP"], "169.254.2.1");
    assert_eq!(after["spec"]["clusterIPs"], json!(["169.254.2.1"]));
    assert_eq!(
        after["spec"]["ports"],
        json!([{"name": "https", "protocol": "TCP", "port": 10268, "targetPort": 6443}])
    );
    // Nothing else moved, resourceVersion least of all.
    for field in ["clusterIP", "clusterIPs", "ports"] {
        after["spec"][field] = before["spec"][field].clone();
    }
    assert_eq!(after, before);
    assert_eq!(harness.counters().get("rewritten"), Some(&1));
}

#[test]
fn the_configured_hub_is_used() {
    let config = json!({"host": "10.0.0.254", "port": 20443});
    let harness = Harness::<MasterService>::configure(config).unwrap();
    let after = harness
        .filter(&ctx(), &service("default", "kubernetes"))
        .json()
        .unwrap();
    assert_eq!(after["spec"]["clusterIPs"], json!(["10.0.0.254"]));
    assert_eq!(after["spec"]["ports"][0]["port"], 20443);
}

#[test]
fn only_the_https_port_changes() {
    let harness = Harness::<MasterService>::configure(json!({})).unwrap();
    let mut before = service("default", "kubernetes");
    before["spec"]["ports"] = json!([
        {"name": "metrics", "protocol": "TCP", "port": 8443, "targetPort": 8443},
        {"name": "https", "protocol": "TCP", "port": 443, "targetPort": 6443}
    ]);
    let after = harness.filter(&ctx(), &before).json().unwrap();
    assert_eq!(after["spec"]["ports"][0], before["spec"]["ports"][0]);
    assert_eq!(after["spec"]["ports"][1]["port"], 10268);
}

#[test]
fn other_services_are_kept_even_when_alike() {
    let harness = Harness::<MasterService>::configure(json!({})).unwrap();
    let mut elsewhere = service("default", "kubernetes");
    elsewhere["metadata"]["namespace"] = json!("kube-system");
    for other in [
        service("kube-system", "metrics-server"),
        service("kube-system", "kube-dns"),
        elsewhere,
    ] {
        assert_eq!(harness.filter(&ctx(), &other), Output::Keep);
    }
    assert!(harness.counters().is_empty());
}

#[test]
fn an_already_rewritten_service_is_kept_without_re_encoding() {
    let harness = Harness::<MasterService>::configure(json!({})).unwrap();
    let rewritten = harness
        .filter(&ctx(), &service("default", "kubernetes"))
        .json()
        .unwrap();
    assert_eq!(harness.filter(&ctx(), &rewritten), Output::Keep);
    // A partial rewrite (clusterIPs still the cloud's) is completed.
    let mut partial = rewritten.clone();
    partial["spec"]["clusterIPs"] = json!(["10.96.0.1"]);
    assert_eq!(harness.filter(&ctx(), &partial).json(), Some(rewritten));
}

#[test]
fn bad_configs_are_refused_and_the_schema_is_declared() {
    for bad in [
        json!({"host": "hub"}),
        json!({"port": 0}),
        json!({"tls": true}),
    ] {
        assert!(Harness::<MasterService>::configure(bad).is_err());
    }
    let manifest = MasterService::manifest();
    assert_eq!(manifest.components, ["kubelet"]);
    assert_eq!(manifest.matches[0].resources, ["services"]);
    assert_eq!(manifest.matches[0].verbs, [Verb::List, Verb::Watch]);
    let schema: Value = serde_json::from_str(manifest.config_schema.as_deref().unwrap()).unwrap();
    assert_eq!(schema, HubAddress::schema());
}
