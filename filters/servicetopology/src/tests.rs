//! The cases of YurtHub's servicetopology tests, on kube-apiserver's JSON, plus v1 Endpoints.

use edgegate_filter_sdk::Resource;
use edgegate_filter_sdk::testing::Output;
use edgegate_filter_sdk::testing::{Harness, list_items as items};
use serde_json::{Value, json};

use super::*;

const SERVICES: &str = include_str!("../fixtures/services.json");
const SLICES_V1BETA1: &str = include_str!("../fixtures/endpointslices.v1beta1.json");
const SLICES_V1: &str = include_str!("../fixtures/endpointslices.v1.json");
const ENDPOINTS: &str = include_str!("../fixtures/endpoints.json");
const NODEPOOLS: &str = include_str!("../fixtures/nodepools.json");
const NODES: &str = include_str!("../fixtures/nodes.json");

/// The addresses in the fixtures, by node: edge-1 and edge-2 are in pool hangzhou, edge-3 in
/// shanghai; 192.168.7.20 has no node.
const ON_EDGE_1: [&str; 2] = ["10.244.1.2", "10.244.1.4"];
const IN_HANGZHOU: [&str; 3] = ["10.244.1.2", "10.244.2.3", "10.244.1.4"];
const ALL: [&str; 5] = [
    "10.244.1.2",
    "10.244.2.3",
    "10.244.1.4",
    "10.244.3.5",
    "192.168.7.20",
];

/// The three shapes of endpoints the filter serves.
#[derive(Clone, Copy, Debug)]
enum Shape {
    V1beta1,
    V1,
    Endpoints,
}

use Shape::{Endpoints, V1, V1beta1};

const SLICES: [Shape; 2] = [V1beta1, V1];
const SHAPES: [Shape; 3] = [V1beta1, V1, Endpoints];

impl Shape {
    /// A kube-proxy watch of this shape on edge-1.
    fn ctx(self) -> Context {
        let (group, version, resource) = match self {
            V1beta1 => ("discovery.k8s.io", "v1beta1", "endpointslices"),
            V1 => ("discovery.k8s.io", "v1", "endpointslices"),
            Endpoints => ("", "v1", "endpoints"),
        };
        Context::new(
            "kube-proxy",
            Verb::Watch,
            Resource::new(group, version, resource),
        )
        .node_name("edge-1")
    }

    /// The fixture object, made to belong to `service` (`None`: to no Service).
    fn object_of(self, service: Option<&str>) -> Value {
        let (list, key) = match self {
            V1beta1 => (
                SLICES_V1BETA1,
                "/metadata/labels/kubernetes.io~1service-name",
            ),
            V1 => (SLICES_V1, "/metadata/labels/kubernetes.io~1service-name"),
            Endpoints => (ENDPOINTS, "/metadata/name"),
        };
        let mut object = items(list).remove(0);
        match service {
            Some(service) => *object.pointer_mut(key).unwrap() = json!(service),
            None => {
                let labels = object["metadata"]["labels"].as_object_mut().unwrap();
                labels.remove("kubernetes.io/service-name");
            }
        }
        object
    }

    /// Where the endpoints are.
    fn endpoints_key(self) -> &'static str {
        match self {
            V1beta1 | V1 => "endpoints",
            Endpoints => "subsets",
        }
    }

    /// The addresses of an object's endpoints, in order (ready, then not ready).
    fn addresses(self, object: &Value) -> Vec<String> {
        let lists = object[self.endpoints_key()].as_array().unwrap().iter();
        let addresses: Vec<&Value> = match self {
            V1beta1 | V1 => lists
                .flat_map(|e| e["addresses"].as_array().unwrap())
                .collect(),
            Endpoints => lists
                .flat_map(|subset| {
                    let ready = subset["addresses"].as_array().into_iter().flatten();
                    ready.chain(subset["notReadyAddresses"].as_array().into_iter().flatten())
                })
                .map(|address| &address["ip"])
                .collect(),
        };
        let mut addresses: Vec<String> = addresses
            .into_iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        addresses.sort();
        addresses
    }
}

fn sorted(addresses: &[&str]) -> Vec<String> {
    let mut addresses: Vec<String> = addresses.iter().map(|a| (*a).to_owned()).collect();
    addresses.sort();
    addresses
}

/// The filter, with the fixtures' Services known to the gateway (and, if asked, its pools
/// and nodes).
fn harness(pools: bool, nodes: bool) -> Harness<ServiceTopology> {
    let harness = Harness::<ServiceTopology>::configure(json!({})).unwrap();
    for service in items(SERVICES) {
        harness.add_object(Resource::new("", "v1", "services"), service);
    }
    for pool in items(NODEPOOLS).into_iter().filter(|_| pools) {
        harness.add_object(
            Resource::new("apps.openyurt.io", "v1beta1", "nodepools"),
            pool,
        );
    }
    for node in items(NODES).into_iter().filter(|_| nodes) {
        harness.add_object(Resource::new("", "v1", "nodes"), node);
    }
    harness
}

/// Runs the filter on the fixture of `shape` for `service`, on edge-1 in `pool`, and returns
/// the addresses sent on; checks that nothing but the endpoints changed.
fn kept(
    harness: &Harness<ServiceTopology>,
    shape: Shape,
    service: &str,
    pool: Option<&str>,
) -> Vec<String> {
    let object = shape.object_of(Some(service));
    let ctx = match pool {
        Some(pool) => shape.ctx().node_pool(pool),
        None => shape.ctx(),
    };
    let out = match harness.filter(&ctx, &object) {
        Output::Keep => return shape.addresses(&object),
        Output::Replace(bytes) => serde_json::from_slice::<Value>(&bytes).unwrap(),
        Output::Drop => panic!("{shape:?} {service}: endpoints objects are never dropped"),
    };
    let without_endpoints = |object: &Value| {
        let mut object = object.clone();
        object
            .as_object_mut()
            .unwrap()
            .remove(shape.endpoints_key());
        object
    };
    assert_eq!(
        without_endpoints(&out),
        without_endpoints(&object),
        "{shape:?}"
    );
    assert_eq!(
        out["metadata"]["resourceVersion"],
        object["metadata"]["resourceVersion"]
    );
    shape.addresses(&out)
}

#[test]
fn hostname_topology_keeps_this_nodes_endpoints() {
    let harness = harness(true, true);
    for shape in SHAPES {
        for pool in [Some("hangzhou"), None] {
            let kept = kept(&harness, shape, "web-node", pool);
            assert_eq!(kept, sorted(&ON_EDGE_1), "{shape:?} in {pool:?}");
        }
    }
    assert_eq!(harness.counters().get("pruned"), Some(&6));
}

#[test]
fn a_prune_is_logged_at_debug_only_when_the_log_shows_debug() {
    let harness = harness(true, true);
    let debug_lines = |harness: &Harness<ServiceTopology>| {
        harness
            .logs()
            .into_iter()
            .filter(|(level, line)| *level == Level::Debug && line.starts_with("pruned"))
            .count()
    };
    kept(&harness, SHAPES[0], "web-node", None);
    assert_eq!(debug_lines(&harness), 1);
    harness.log_level(Level::Info);
    kept(&harness, SHAPES[0], "web-node", None);
    assert_eq!(
        debug_lines(&harness),
        1,
        "not written, as the host does not show it"
    );
    assert_eq!(
        harness.counters().get("pruned"),
        Some(&2),
        "counted all the same"
    );
}

#[test]
fn pool_and_zone_topology_keep_the_pools_endpoints() {
    let harness = harness(true, false);
    for shape in SHAPES {
        for service in ["web-pool", "web-zone"] {
            let kept = kept(&harness, shape, service, Some("hangzhou"));
            assert_eq!(kept, sorted(&IN_HANGZHOU), "{shape:?} {service}");
        }
    }
}

#[test]
fn pool_members_come_from_labelled_nodes_without_a_nodepool() {
    let harness = harness(false, true);
    for shape in SHAPES {
        let kept = kept(&harness, shape, "web-pool", Some("hangzhou"));
        assert_eq!(kept, sorted(&IN_HANGZHOU), "{shape:?}");
    }
}

#[test]
fn a_node_in_no_pool_falls_back_to_the_hostname_rule() {
    let harness = harness(true, true);
    for shape in SHAPES {
        for pool in [None, Some("")] {
            let kept = kept(&harness, shape, "web-pool", pool);
            assert_eq!(kept, sorted(&ON_EDGE_1), "{shape:?} in {pool:?}");
        }
    }
}

#[test]
fn this_node_counts_as_a_member_before_the_nodepool_lists_it() {
    let harness = harness(false, false);
    harness.add_object(
        Resource::new("apps.openyurt.io", "v1beta1", "nodepools"),
        json!({"metadata": {"name": "hangzhou"}, "status": {"nodes": ["edge-2"]}}),
    );
    let kept = kept(&harness, V1, "web-pool", Some("hangzhou"));
    assert_eq!(kept, sorted(&IN_HANGZHOU));
}

#[test]
fn an_unknown_pool_leaves_the_endpoints_alone() {
    let harness = harness(false, false);
    for shape in SHAPES {
        let object = shape.object_of(Some("web-pool"));
        let ctx = shape.ctx().node_pool("hangzhou");
        assert_eq!(harness.filter(&ctx, &object), Output::Keep, "{shape:?}");
    }
    assert_eq!(harness.counters().get("pool-unknown"), Some(&3));
    let warnings = harness
        .logs()
        .into_iter()
        .filter(|(level, _)| *level == Level::Warn);
    assert_eq!(warnings.count(), 3, "one per call");
}

#[test]
fn no_endpoints_left_still_sends_the_object_empty() {
    let harness = harness(true, true);
    // edge-9 has no endpoints, and neither has its pool, beijing.
    let edge_9 = json!({"metadata": {"name": "edge-9",
                                     "labels": {"apps.openyurt.io/nodepool": "beijing"}}});
    harness.add_object(Resource::new("", "v1", "nodes"), edge_9);
    for shape in SHAPES {
        let object = shape.object_of(Some("web-pool"));
        let alone = Context {
            node_name: "edge-9".into(),
            ..shape.ctx()
        };
        for ctx in [alone.clone().node_pool("beijing"), alone] {
            let out = harness.filter(&ctx, &object).json().unwrap();
            assert_eq!(out[shape.endpoints_key()], json!([]), "{shape:?}");
            assert_eq!(out["metadata"], object["metadata"]);
        }
    }
}

#[test]
fn services_without_a_known_topology_keep_their_endpoints() {
    let harness = harness(true, true);
    harness.add_object(
        Resource::new("", "v1", "services"),
        json!({"metadata": {"name": "web-region", "namespace": "default",
               "annotations": {"openyurt.io/topologyKeys": "topology.kubernetes.io/region"}}}),
    );
    for shape in SHAPES {
        for service in ["web-plain", "web-region", "web-missing"] {
            let object = shape.object_of(Some(service));
            let ctx = shape.ctx().node_pool("hangzhou");
            assert_eq!(
                harness.filter(&ctx, &object),
                Output::Keep,
                "{shape:?} {service}"
            );
        }
    }
    for shape in SLICES {
        let unlabelled = shape.object_of(None);
        assert_eq!(
            harness.filter(&shape.ctx(), &unlabelled),
            Output::Keep,
            "{shape:?}"
        );
    }
    assert!(harness.counters().is_empty());
}

#[test]
fn endpoints_without_a_node_are_never_kept() {
    let harness = harness(true, true);
    for shape in SHAPES {
        let kept = kept(&harness, shape, "web-pool", Some("hangzhou"));
        assert!(!kept.contains(&"192.168.7.20".to_owned()), "{shape:?}");
    }
}

#[test]
fn v1beta1_endpoints_fall_back_to_their_node_name() {
    let harness = harness(true, true);
    let mut slice = V1beta1.object_of(Some("web-node"));
    for endpoint in slice["endpoints"].as_array_mut().unwrap() {
        if let Some(Value::Object(topology)) = endpoint.get_mut("topology") {
            let host = topology.remove("kubernetes.io/hostname").unwrap();
            endpoint["nodeName"] = host;
        }
    }
    let out = harness.filter(&V1beta1.ctx(), &slice).json().unwrap();
    assert_eq!(V1beta1.addresses(&out), sorted(&ON_EDGE_1));
}

#[test]
fn objects_whose_endpoints_all_stay_are_kept_as_they_are() {
    let harness = harness(true, true);
    for shape in SHAPES {
        let pruned = harness.filter(&shape.ctx(), &shape.object_of(Some("web-node")));
        // Only edge-1's endpoints are left: nothing to remove, so nothing is re-encoded.
        let pruned = pruned.json().unwrap();
        assert_eq!(
            harness.filter(&shape.ctx(), &pruned),
            Output::Keep,
            "{shape:?}"
        );
    }
}

#[test]
fn other_versions_and_resources_are_kept() {
    let harness = harness(true, true);
    let slice = V1.object_of(Some("web-node"));
    let alpha = Context::new(
        "kube-proxy",
        Verb::List,
        Resource::new("discovery.k8s.io", "v1alpha1", "endpointslices"),
    );
    let pods = Context::new("kube-proxy", Verb::List, Resource::new("", "v1", "pods"));
    for ctx in [alpha, pods] {
        assert_eq!(
            harness.filter(&ctx.node_name("edge-1"), &slice),
            Output::Keep
        );
    }
}

#[test]
fn a_batch_decides_each_slice_of_a_list() {
    let harness = harness(true, true);
    let services = ["web-node", "web-plain", "web-pool", "web-missing"];
    let batch: Vec<Value> = services.iter().map(|s| V1.object_of(Some(s))).collect();
    let outs = harness.filter_batch(&V1.ctx().node_pool("hangzhou"), &batch);
    assert_eq!(V1.addresses(&outs[0].json().unwrap()), sorted(&ON_EDGE_1));
    assert_eq!(outs[1], Output::Keep);
    assert_eq!(V1.addresses(&outs[2].json().unwrap()), sorted(&IN_HANGZHOU));
    assert_eq!(outs[3], Output::Keep);
    assert_eq!(V1.addresses(&batch[1]), sorted(&ALL));
}

#[test]
fn the_manifest_covers_slices_and_endpoints_for_the_proxies() {
    let manifest = ServiceTopology::manifest();
    assert_eq!(manifest.name, "servicetopology");
    assert_eq!(
        manifest.components,
        ["kube-proxy", "coredns", "nginx-ingress-controller"]
    );
    let resources: Vec<(&str, &str)> = manifest
        .matches
        .iter()
        .flat_map(|m| {
            m.resources
                .iter()
                .map(move |r| (m.group.as_str(), r.as_str()))
        })
        .collect();
    assert_eq!(
        resources,
        [("discovery.k8s.io", "endpointslices"), ("", "endpoints")]
    );
    assert!(
        manifest
            .matches
            .iter()
            .all(|m| m.verbs == [Verb::List, Verb::Watch])
    );
}
