//! YurtHub's discardcloudservice cases on kube-apiserver's JSON.

use edgegate_filter_sdk::Resource;
use edgegate_filter_sdk::testing::Output;
use edgegate_filter_sdk::testing::{Harness, list_item, list_items};
use serde_json::{Value, json};

use super::*;

const SERVICES: &str = include_str!("../fixtures/services.json");

fn decide(service: &Value) -> Output {
    let harness = Harness::<DiscardCloudService>::configure(json!({})).unwrap();
    let ctx = Context::new(
        "kube-proxy",
        Verb::List,
        Resource::new("", "v1", "services"),
    )
    .node_name("edge-1");
    harness.filter(&ctx, service)
}

#[test]
fn annotated_load_balancers_are_dropped() {
    assert_eq!(
        decide(&list_item(SERVICES, "shop", "shop-lb")),
        Output::Drop
    );
}

#[test]
fn the_tunnel_servers_service_is_always_dropped() {
    let mut tunnel = list_item(SERVICES, "kube-system", "x-tunnel-server-internal-svc");
    assert_eq!(decide(&tunnel), Output::Drop);
    tunnel["spec"]["type"] = json!("NodePort");
    assert_eq!(decide(&tunnel), Output::Drop);
    tunnel["metadata"]["namespace"] = json!("default");
    assert_eq!(decide(&tunnel), Output::Keep, "only in kube-system");
}

#[test]
fn the_annotation_counts_only_on_load_balancers_and_only_when_true() {
    assert_eq!(
        decide(&list_item(SERVICES, "shop", "shop-edge")),
        Output::Keep,
        "no annotation"
    );
    let mut service = list_item(SERVICES, "shop", "shop-lb");
    for kind in ["ClusterIP", "NodePort", "ExternalName"] {
        service["spec"]["type"] = json!(kind);
        assert_eq!(decide(&service), Output::Keep, "{kind}");
    }
    let mut service = list_item(SERVICES, "shop", "shop-lb");
    for value in ["false", "True", ""] {
        service["metadata"]["annotations"][DISCARD] = json!(value);
        assert_eq!(decide(&service), Output::Keep, "{value:?}");
    }
}

#[test]
fn a_list_loses_exactly_the_cloud_services() {
    let harness = Harness::<DiscardCloudService>::configure(json!({})).unwrap();
    let ctx = Context::new(
        "kube-proxy",
        Verb::Watch,
        Resource::new("", "v1", "services"),
    );
    let outs = harness.filter_batch(&ctx, &list_items(SERVICES));
    assert_eq!(outs, [Output::Drop, Output::Drop, Output::Keep]);
    assert_eq!(harness.counters().get("discarded"), Some(&2));
    let manifest = DiscardCloudService::manifest();
    assert_eq!(
        (manifest.name.as_str(), manifest.components.as_slice()),
        (
            "discard-cloud-service",
            ["kube-proxy".to_owned()].as_slice()
        )
    );
}

#[test]
fn a_service_without_the_annotation_is_kept_on_its_metadata_alone() {
    let harness = Harness::<DiscardCloudService>::configure(json!({})).unwrap();
    let ctx = Context::new(
        "kube-proxy",
        Verb::Watch,
        Resource::new("", "v1", "services"),
    );
    // Nothing after the metadata is read: a body that would not parse is never reached.
    let unread = br#"{"metadata": {"name": "web", "namespace": "shop", "annotations": {"a": "b"}}, "spec": [}"#;
    assert_eq!(harness.filter_bytes(&ctx, unread), Output::Keep);
}
