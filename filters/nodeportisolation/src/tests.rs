//! YurtHub's nodeportisolation cases on kube-apiserver's JSON: every annotation form, on
//! nodes in pool `foo`, in pool `bar` and in no pool.

use edgegate_filter_sdk::Resource;
use edgegate_filter_sdk::kube::listen::NODEPORT_LISTEN;
use edgegate_filter_sdk::testing::Output;
use edgegate_filter_sdk::testing::{Harness, list_items};
use serde_json::{Value, json};

use super::*;

const SERVICES: &str = include_str!("../fixtures/services.json");

/// The fixture NodePort Service, annotated `listen` (or not at all with `None`).
fn node_port(listen: Option<&str>) -> Value {
    let mut service = list_items(SERVICES).remove(0);
    let annotations = service["metadata"]["annotations"].as_object_mut().unwrap();
    match listen {
        Some(listen) => annotations.insert(NODEPORT_LISTEN.into(), json!(listen)),
        None => annotations.remove(NODEPORT_LISTEN),
    };
    service
}

/// Whether kube-proxy on a node of `pool` sees `service`.
fn seen_in(pool: Option<&str>, service: &Value) -> bool {
    let harness = Harness::<NodePortIsolation>::configure(json!({})).unwrap();
    let ctx = Context::new(
        "kube-proxy",
        Verb::List,
        Resource::new("", "v1", "services"),
    )
    .node_name("edge-1");
    let ctx = match pool {
        Some(pool) => ctx.node_pool(pool),
        None => ctx,
    };
    match harness.filter(&ctx, service) {
        Output::Keep => true,
        Output::Drop => false,
        Output::Replace(_) => panic!("services are kept or dropped, never rewritten"),
    }
}

/// `(annotation, seen in foo, seen in bar)`, YurtHub's cases and their neighbours.
const FORMS: [(&str, bool, bool); 10] = [
    ("foo", true, false),
    ("-foo", false, false),
    ("*", true, true),
    ("-foo,*", false, true),
    ("*,-foo", false, true),
    ("foo,-bar", true, false),
    ("foo,-foo", true, false),
    ("-foo,foo", false, false),
    (" foo , bar ", true, true),
    ("", false, false),
];

#[test]
fn each_annotation_form_opens_the_pools_it_names() {
    for (listen, in_foo, in_bar) in FORMS {
        let service = node_port(Some(listen));
        assert_eq!(seen_in(Some("foo"), &service), in_foo, "{listen:?} in foo");
        assert_eq!(seen_in(Some("bar"), &service), in_bar, "{listen:?} in bar");
    }
}

#[test]
fn a_node_in_no_pool_sees_every_service() {
    for (listen, _, _) in FORMS {
        let service = node_port(Some(listen));
        assert!(seen_in(None, &service), "{listen:?}");
        assert!(seen_in(Some(""), &service), "{listen:?}, empty pool name");
    }
}

#[test]
fn load_balancers_are_isolated_like_node_ports() {
    let load_balancer = &list_items(SERVICES)[1];
    assert!(!seen_in(Some("foo"), load_balancer));
    assert!(seen_in(Some("bar"), load_balancer));
}

#[test]
fn services_without_node_ports_or_without_the_annotation_are_kept() {
    assert!(seen_in(Some("bar"), &node_port(None)));
    let mut service = node_port(Some("-bar"));
    for kind in ["ClusterIP", "ExternalName"] {
        service["spec"]["type"] = json!(kind);
        assert!(seen_in(Some("bar"), &service), "{kind}");
    }
    let telemetry = &list_items(SERVICES)[2];
    assert!(seen_in(Some("bar"), telemetry), "no annotation");
}

#[test]
fn drops_are_counted_and_the_manifest_targets_kube_proxy() {
    let harness = Harness::<NodePortIsolation>::configure(json!({})).unwrap();
    let ctx = Context::new(
        "kube-proxy",
        Verb::Watch,
        Resource::new("", "v1", "services"),
    )
    .node_pool("bar");
    let outs = harness.filter_batch(&ctx, &list_items(SERVICES));
    assert_eq!(outs, [Output::Drop, Output::Keep, Output::Keep]);
    assert_eq!(harness.counters().get("isolated"), Some(&1));
    let manifest = NodePortIsolation::manifest();
    assert_eq!(manifest.components, ["kube-proxy"]);
    assert_eq!(manifest.matches[0].verbs, [Verb::List, Verb::Watch]);
}
