//! The endpoints of a Service in its three shapes (EndpointSlice v1 and v1beta1, core v1
//! Endpoints), each endpoint with the node it runs on, pruned by that node.
//!
//! The shape comes from the request, not from the object: the items of a JSON list carry no
//! `apiVersion` or `kind`.

use serde_json::Value;

use crate::object::{Item, Object};
use crate::types::Context;

/// The label (and v1beta1 topology key) that names a node.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Which shape of endpoint object a request serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointsKind {
    /// `discovery.k8s.io/v1` EndpointSlice: the node is `endpoints[].nodeName`, or else
    /// `endpoints[].deprecatedTopology["kubernetes.io/hostname"]`, where Kubernetes 1.21's
    /// conversion left it for slices written through v1beta1 (kube-proxy reads it so too).
    SliceV1,
    /// `discovery.k8s.io/v1beta1` EndpointSlice: the node is
    /// `endpoints[].topology["kubernetes.io/hostname"]`, or else `endpoints[].nodeName`.
    SliceV1beta1,
    /// Core `v1` Endpoints: the node is `subsets[].addresses[].nodeName` (and the same in
    /// `notReadyAddresses`).
    Endpoints,
}

impl EndpointsKind {
    /// The shape a request's objects have, from its group, version and resource; `None` for
    /// anything else (other resources, other versions).
    pub fn of(ctx: &Context) -> Option<EndpointsKind> {
        match (
            ctx.group.as_str(),
            ctx.version.as_str(),
            ctx.resource.as_str(),
        ) {
            ("discovery.k8s.io", "v1", "endpointslices") => Some(EndpointsKind::SliceV1),
            ("discovery.k8s.io", "v1beta1", "endpointslices") => Some(EndpointsKind::SliceV1beta1),
            ("", "v1", "endpoints") => Some(EndpointsKind::Endpoints),
            _ => None,
        }
    }

    /// Whether this is an EndpointSlice shape.
    pub fn is_slice(self) -> bool {
        matches!(self, EndpointsKind::SliceV1 | EndpointsKind::SliceV1beta1)
    }

    /// The node an endpoint (a slice's endpoint or an Endpoints address) runs on.
    pub fn node_of(self, endpoint: &Value) -> Option<&str> {
        let hostname = || {
            endpoint
                .get(self.topology_field()?)?
                .get(HOSTNAME_LABEL)?
                .as_str()
        };
        self.pick(endpoint.get("nodeName").and_then(Value::as_str), hostname)
    }

    /// The field of a slice's endpoint whose hostname key may place it.
    fn topology_field(self) -> Option<&'static str> {
        match self {
            EndpointsKind::SliceV1beta1 => Some("topology"),
            EndpointsKind::SliceV1 => Some("deprecatedTopology"),
            EndpointsKind::Endpoints => None,
        }
    }

    /// Whether a slice's endpoint runs on a node `keep` accepts; an endpoint whose placement
    /// does not read runs nowhere. Only the fields that place it are parsed.
    fn keeps(self, endpoint: &Item, keep: &impl Fn(&str) -> bool) -> bool {
        let node_name = endpoint.string("nodeName");
        let hostname = self.topology_field().and_then(|field| {
            endpoint
                .object(field)
                .and_then(|topology| topology.string(HOSTNAME_LABEL))
        });
        self.pick(node_name.as_deref(), || hostname.as_deref())
            .is_some_and(keep)
    }

    /// The node of an endpoint from its `nodeName` and its topology's hostname: v1beta1's
    /// topology first, v1's deprecated topology only when `nodeName` is absent.
    fn pick<'a>(
        self,
        node_name: Option<&'a str>,
        hostname: impl FnOnce() -> Option<&'a str>,
    ) -> Option<&'a str> {
        match self {
            EndpointsKind::Endpoints => node_name,
            EndpointsKind::SliceV1 => node_name.or_else(hostname),
            EndpointsKind::SliceV1beta1 => hostname().or(node_name),
        }
    }

    /// Keeps only the endpoints whose node `keep` accepts; endpoints with no node are removed
    /// too, as they cannot be placed. An Endpoints subset left with no address at all is
    /// removed; a slice left with no endpoint keeps an empty list (the object itself stays,
    /// so that clients learn its endpoints are gone). Returns whether anything was removed.
    pub fn retain_by_node(self, object: &mut Object, keep: impl Fn(&str) -> bool) -> bool {
        let accept = |endpoint: &Value| self.node_of(endpoint).is_some_and(&keep);
        match self {
            // Slices are pruned as text: endpoints are read for their node, never built.
            EndpointsKind::SliceV1 | EndpointsKind::SliceV1beta1 => {
                object.retain_items("endpoints", |endpoint| self.keeps(endpoint, &keep))
            }
            EndpointsKind::Endpoints => match object.get_mut("subsets") {
                Some(Value::Array(subsets)) => {
                    let mut changed = false;
                    for subset in subsets.iter_mut() {
                        changed |= retain_addresses(subset, &accept);
                    }
                    let before = subsets.len();
                    subsets.retain(has_addresses);
                    changed || subsets.len() != before
                }
                _ => false,
            },
        }
    }
}

/// Address lists of an Endpoints subset.
const ADDRESS_LISTS: [&str; 2] = ["addresses", "notReadyAddresses"];

/// Prunes both address lists of a subset, removing a list that becomes empty (the API omits
/// empty lists).
fn retain_addresses(subset: &mut Value, accept: &impl Fn(&Value) -> bool) -> bool {
    let Value::Object(subset) = subset else {
        return false;
    };
    let mut changed = false;
    for key in ADDRESS_LISTS {
        if retain(subset.get_mut(key), accept) {
            changed = true;
            if subset
                .get(key)
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty)
            {
                subset.remove(key);
            }
        }
    }
    changed
}

fn has_addresses(subset: &Value) -> bool {
    ADDRESS_LISTS.iter().any(|key| {
        subset
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|list| !list.is_empty())
    })
}

/// Keeps the items of an array that `accept` accepts; whether any was removed.
fn retain(list: Option<&mut Value>, accept: impl Fn(&Value) -> bool) -> bool {
    match list {
        Some(Value::Array(items)) => {
            let before = items.len();
            items.retain(|item| accept(item));
            items.len() != before
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::types::{Resource, Verb};

    fn ctx(group: &str, version: &str, resource: &str) -> Context {
        Context::new(
            "kube-proxy",
            Verb::List,
            Resource::new(group, version, resource),
        )
    }

    fn object(value: Value) -> Object {
        Object::from_value(value).unwrap()
    }

    #[test]
    fn the_kind_comes_from_the_request() {
        let of = |g, v, r| EndpointsKind::of(&ctx(g, v, r));
        assert_eq!(
            of("discovery.k8s.io", "v1", "endpointslices"),
            Some(EndpointsKind::SliceV1)
        );
        assert_eq!(
            of("discovery.k8s.io", "v1beta1", "endpointslices"),
            Some(EndpointsKind::SliceV1beta1)
        );
        assert_eq!(of("", "v1", "endpoints"), Some(EndpointsKind::Endpoints));
        assert_eq!(of("discovery.k8s.io", "v1alpha1", "endpointslices"), None);
        assert_eq!(of("", "v1", "services"), None);
        assert!(EndpointsKind::SliceV1beta1.is_slice() && !EndpointsKind::Endpoints.is_slice());
    }

    #[test]
    fn v1beta1_prefers_the_topology_hostname() {
        let kind = EndpointsKind::SliceV1beta1;
        let both = json!({"nodeName": "b", "topology": {HOSTNAME_LABEL: "a"}});
        assert_eq!(kind.node_of(&both), Some("a"));
        assert_eq!(kind.node_of(&json!({"nodeName": "b"})), Some("b"));
        assert_eq!(kind.node_of(&json!({"topology": {}})), None);
        assert_eq!(EndpointsKind::SliceV1.node_of(&both), Some("b"));
    }

    #[test]
    fn v1_falls_back_to_the_deprecated_topology_hostname() {
        let kind = EndpointsKind::SliceV1;
        // As Kubernetes 1.21 converted a slice written through v1beta1 without a nodeName.
        let converted = json!({"deprecatedTopology": {HOSTNAME_LABEL: "a"}});
        assert_eq!(kind.node_of(&converted), Some("a"));
        let both = json!({"nodeName": "b", "deprecatedTopology": {HOSTNAME_LABEL: "a"}});
        assert_eq!(kind.node_of(&both), Some("b"), "nodeName first");
        let mut slice = object(json!({"endpoints": [
            {"addresses": ["10.0.0.1"], "deprecatedTopology": {HOSTNAME_LABEL: "n1"}},
            {"addresses": ["10.0.0.2"], "deprecatedTopology": {HOSTNAME_LABEL: "n2"}},
        ]}));
        assert!(kind.retain_by_node(&mut slice, |n| n == "n1"));
        assert_eq!(
            slice.get("endpoints"),
            Some(
                &json!([{"addresses": ["10.0.0.1"], "deprecatedTopology": {HOSTNAME_LABEL: "n1"}}])
            )
        );
    }

    #[test]
    fn slices_keep_accepted_nodes_and_drop_unplaced_endpoints() {
        let mut slice = object(json!({"endpoints": [
            {"addresses": ["10.0.0.1"], "nodeName": "n1"},
            {"addresses": ["10.0.0.2"]},
            {"addresses": ["10.0.0.3"], "nodeName": "n2"},
        ]}));
        assert!(EndpointsKind::SliceV1.retain_by_node(&mut slice, |n| n == "n1"));
        assert_eq!(
            slice.get("endpoints"),
            Some(&json!([{"addresses": ["10.0.0.1"], "nodeName": "n1"}]))
        );
        assert!(!EndpointsKind::SliceV1.retain_by_node(&mut slice, |n| n == "n1"));
        assert!(EndpointsKind::SliceV1.retain_by_node(&mut slice, |_| false));
        assert_eq!(slice.get("endpoints"), Some(&json!([])), "empty, not gone");
        let mut none = object(json!({"endpoints": null}));
        assert!(!EndpointsKind::SliceV1.retain_by_node(&mut none, |_| false));
    }

    #[test]
    fn endpoints_prune_both_address_lists_and_empty_subsets() {
        let address = |ip: &str, node: &str| json!({"ip": ip, "nodeName": node});
        let mut endpoints = object(json!({"subsets": [
            {"addresses": [address("10.0.0.1", "n1"), address("10.0.0.2", "n2")],
             "notReadyAddresses": [address("10.0.0.3", "n2")],
             "ports": [{"port": 80}]},
            {"notReadyAddresses": [address("10.0.0.4", "n1")], "ports": [{"port": 81}]},
            {"addresses": [address("10.0.0.5", "n2")], "ports": [{"port": 82}]},
        ]}));
        assert!(EndpointsKind::Endpoints.retain_by_node(&mut endpoints, |n| n == "n1"));
        assert_eq!(
            endpoints.get("subsets"),
            Some(&json!([
                {"addresses": [address("10.0.0.1", "n1")], "ports": [{"port": 80}]},
                {"notReadyAddresses": [address("10.0.0.4", "n1")], "ports": [{"port": 81}]},
            ]))
        );
        assert!(!EndpointsKind::Endpoints.retain_by_node(&mut endpoints, |n| n == "n1"));
        assert!(EndpointsKind::Endpoints.retain_by_node(&mut endpoints, |_| false));
        assert_eq!(endpoints.get("subsets"), Some(&json!([])));
        let mut bare = object(json!({"metadata": {"name": "web"}}));
        assert!(!EndpointsKind::Endpoints.retain_by_node(&mut bare, |_| false));
    }

    #[test]
    fn slices_read_from_bytes_are_pruned_as_text() {
        let bytes = br#"{"metadata": {"name": "web-1"}, "endpoints": [
            {"addresses": ["10.0.0.1"], "nodeName": "n\u0031"},
            {"addresses": ["10.0.0.2"], "nodeName": 7},
            {"addresses": ["10.0.0.3"],  "nodeName": "n2"},
            {"addresses": ["10.0.0.4"], "topology": {"kubernetes.io/hostname": "n1"}, "nodeName": "n2"}
        ]}"#;
        let prune = |kind: EndpointsKind, keep: fn(&str) -> bool| {
            let mut slice = Object::from_slice(bytes).unwrap();
            let removed = kind.retain_by_node(&mut slice, keep);
            (removed, String::from_utf8(slice.to_vec()).unwrap())
        };
        let (removed, v1) = prune(EndpointsKind::SliceV1, |n| n == "n1");
        assert!(removed);
        assert_eq!(
            v1,
            r#"{"metadata":{"name": "web-1"},"endpoints":[{"addresses": ["10.0.0.1"], "nodeName": "n\u0031"}]}"#,
            "an escaped name reads; a number is no node; kept endpoints keep their bytes"
        );
        let (_, v1beta1) = prune(EndpointsKind::SliceV1beta1, |n| n == "n1");
        let pruned: Value = serde_json::from_str(&v1beta1).unwrap();
        let ips: Vec<&str> = pruned["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["addresses"][0].as_str().unwrap())
            .collect();
        assert_eq!(ips, ["10.0.0.1", "10.0.0.4"], "the topology hostname wins");
        let (removed, all) = prune(EndpointsKind::SliceV1, |n| n != "nobody");
        assert!(removed, "the endpoint without a readable node goes");
        assert_eq!(
            serde_json::from_str::<Value>(&all).unwrap()["endpoints"]
                .as_array()
                .unwrap()
                .len(),
            3
        );

        let mut unchanged = Object::from_slice(br#"{"endpoints": [{"nodeName": "n1"}]}"#).unwrap();
        assert!(!EndpointsKind::SliceV1.retain_by_node(&mut unchanged, |n| n == "n1"));
        assert_eq!(
            unchanged.to_vec(),
            br#"{"endpoints": [{"nodeName": "n1"}]}"#
        );
        let mut not_a_list = Object::from_slice(br#"{"endpoints": {"a": 1}}"#).unwrap();
        assert!(!EndpointsKind::SliceV1.retain_by_node(&mut not_a_list, |_| false));
    }
}
