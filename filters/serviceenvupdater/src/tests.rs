//! YurtHub's serviceenvupdater cases on kube-apiserver's JSON, plus init containers.

use edgegate_filter_sdk::Resource;
use edgegate_filter_sdk::testing::Output;
use edgegate_filter_sdk::testing::{Harness, list_item};
use serde_json::{Value, json};

use super::*;

const PODS: &str = include_str!("../fixtures/pods.json");

fn harness(config: Value) -> Harness<ServiceEnvUpdater> {
    Harness::<ServiceEnvUpdater>::configure(config).unwrap()
}

fn ctx() -> Context {
    Context::new("kubelet", Verb::Watch, Resource::new("", "v1", "pods")).node_name("edge-1")
}

/// The env of the container at `pointer`, as `(name, value)` pairs.
fn env(pod: &Value, pointer: &str) -> Vec<(String, Value)> {
    let vars = pod.pointer(pointer).unwrap()["env"].as_array().unwrap();
    vars.iter()
        .map(|var| {
            let name = var["name"].as_str().unwrap().to_owned();
            (name, var.get("value").cloned().unwrap_or(Value::Null))
        })
        .collect()
}

#[test]
fn existing_variables_of_containers_and_init_containers_are_overwritten() {
    let before = list_item(PODS, "kube-system", "calico-node-x7k2p");
    let mut after = harness(json!({})).filter(&ctx(), &before).json().unwrap();
    for (container, first) in [
        (
            "/spec/initContainers/0",
            ("CNI_CONF_NAME", "10-calico.conflist"),
        ),
        ("/spec/containers/0", ("DATASTORE_TYPE", "kubernetes")),
    ] {
        let expected = [first, (HOST_VAR, "169.254.2.1"), (PORT_VAR, "10268")]
            .map(|(name, value)| (name.to_owned(), json!(value)));
        assert_eq!(env(&after, container)[..3], expected, "{container}");
    }
    assert_eq!(
        env(&after, "/spec/containers/0")[3],
        ("NODENAME".to_owned(), Value::Null)
    );
    // Only those values moved: the valueFrom of NODENAME, metadata and resourceVersion stay.
    for at in ["/spec/initContainers/0/env", "/spec/containers/0/env"] {
        for i in [1, 2] {
            let value = before.pointer(&format!("{at}/{i}/value")).unwrap().clone();
            *after.pointer_mut(&format!("{at}/{i}/value")).unwrap() = value;
        }
    }
    assert_eq!(after, before);
}

#[test]
fn the_configured_hub_is_used() {
    let harness = harness(json!({"host": "10.0.0.254", "port": 20443}));
    let after = harness
        .filter(&ctx(), &list_item(PODS, "kube-system", "calico-node-x7k2p"))
        .json()
        .unwrap();
    let vars = env(&after, "/spec/containers/0");
    assert_eq!(vars[1].1, "10.0.0.254");
    assert_eq!(vars[2].1, "20443");
}

#[test]
fn variables_are_never_added() {
    let harness = harness(json!({}));
    assert_eq!(
        harness.filter(&ctx(), &list_item(PODS, "default", "web-6b7d9c5f4-2kx8p")),
        Output::Keep
    );
    // Only the port set: only the port is overwritten, the host is not added.
    let mut only_port = list_item(PODS, "default", "web-6b7d9c5f4-2kx8p");
    only_port["spec"]["containers"][0]["env"] =
        json!([{"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]);
    let after = harness.filter(&ctx(), &only_port).json().unwrap();
    assert_eq!(
        after["spec"]["containers"][0]["env"],
        json!([{"name": "KUBERNETES_SERVICE_PORT", "value": "10268"}])
    );
    let mut no_env = list_item(PODS, "default", "web-6b7d9c5f4-2kx8p");
    no_env["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("env");
    assert_eq!(harness.filter(&ctx(), &no_env), Output::Keep);
}

#[test]
fn values_already_at_the_hub_are_kept_without_re_encoding() {
    let harness = harness(json!({}));
    let rewritten = harness
        .filter(&ctx(), &list_item(PODS, "kube-system", "calico-node-x7k2p"))
        .json()
        .unwrap();
    assert_eq!(harness.filter(&ctx(), &rewritten), Output::Keep);
    assert_eq!(harness.counters().get("rewritten"), Some(&1));
}

#[test]
fn a_reference_gives_way_to_the_hubs_value() {
    let mut by_reference = list_item(PODS, "default", "web-6b7d9c5f4-2kx8p");
    by_reference["spec"]["containers"][0]["env"] = json!([{"name": "KUBERNETES_SERVICE_HOST",
        "valueFrom": {"configMapKeyRef": {"name": "kubernetes-services-endpoint", "key": "host"}}}]);
    let after = harness(json!({}))
        .filter(&ctx(), &by_reference)
        .json()
        .unwrap();
    assert_eq!(
        after["spec"]["containers"][0]["env"],
        json!([{"name": "KUBERNETES_SERVICE_HOST", "value": "169.254.2.1"}])
    );
}

#[test]
fn the_manifest_asks_for_kubelets_pods() {
    let manifest = ServiceEnvUpdater::manifest();
    assert_eq!(manifest.components, ["kubelet"]);
    assert_eq!(manifest.matches[0].resources, ["pods"]);
    assert_eq!(
        manifest.matches[0].verbs,
        [Verb::Get, Verb::List, Verb::Watch]
    );
    assert!(Harness::<ServiceEnvUpdater>::configure(json!({"port": "x"})).is_err());
}
