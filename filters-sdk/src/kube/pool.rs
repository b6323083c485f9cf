//! The member nodes of a node pool, from the gateway's view of the cluster.

use std::collections::BTreeSet;

use serde_json::Value;

use super::annotations::is_label_value;
use crate::host;
use crate::types::Resource;

/// The label OpenYurt puts on a node to place it in a pool.
pub const NODE_POOL_LABEL: &str = "apps.openyurt.io/nodepool";

/// NodePools, in the version looked up.
pub const NODE_POOLS: Resource<'static> = Resource::new("apps.openyurt.io", "v1beta1", "nodepools");

/// Nodes.
pub const NODES: Resource<'static> = Resource::new("", "v1", "nodes");

/// The nodes of `pool`: the `.status.nodes` of the NodePool `pool`
/// (`get(NODE_POOLS, None, pool)`), or, when that finds none,
/// the nodes labelled `apps.openyurt.io/nodepool=<pool>`
/// (`list(NODES, None, "apps.openyurt.io/nodepool=<pool>")`). `None` when neither
/// knows a member: the gateway has not seen the pool, which is not the same as an empty one.
pub fn members(pool: &str) -> Option<BTreeSet<String>> {
    let from_pool = nodepool_members(pool);
    if !from_pool.is_empty() {
        return Some(from_pool);
    }
    // A name that is not a label value cannot be a label's value, and would make the
    // selector fail to parse (which traps the call).
    if !is_label_value(pool) {
        return None;
    }
    let selector = format!("{NODE_POOL_LABEL}={pool}");
    let labelled: BTreeSet<String> = host::list(NODES, None, &selector)
        .iter()
        .filter_map(|node| node.name().map(str::to_owned))
        .collect();
    (!labelled.is_empty()).then_some(labelled)
}

fn nodepool_members(pool: &str) -> BTreeSet<String> {
    host::get(NODE_POOLS, None, pool)
        .and_then(|nodepool| nodepool.status("nodes").cloned())
        .and_then(|nodes| match nodes {
            Value::Array(nodes) => Some(nodes),
            _ => None,
        })
        .into_iter()
        .flatten()
        .filter_map(|node| match node {
            Value::String(node) => Some(node),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::Host;

    fn set(names: &[&str]) -> Option<BTreeSet<String>> {
        Some(names.iter().map(|n| (*n).to_owned()).collect())
    }

    fn node(name: &str, pool: Option<&str>) -> Value {
        let labels = match pool {
            Some(pool) => json!({NODE_POOL_LABEL: pool, "kubernetes.io/hostname": name}),
            None => json!({"kubernetes.io/hostname": name}),
        };
        json!({"metadata": {"name": name, "labels": labels}})
    }

    fn nodepool(name: &str, nodes: Value) -> Value {
        json!({"apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
               "metadata": {"name": name}, "spec": {"type": "Edge"}, "status": {"nodes": nodes}})
    }

    #[test]
    fn the_nodepool_status_lists_the_members() {
        let host = Host::install();
        host.add_object(NODE_POOLS, nodepool("hangzhou", json!(["n1", "n2"])));
        host.add_object(NODES, node("n3", Some("hangzhou")));
        assert_eq!(members("hangzhou"), set(&["n1", "n2"]), "the NodePool wins");
    }

    #[test]
    fn labelled_nodes_stand_in_for_a_missing_or_empty_nodepool() {
        let host = Host::install();
        host.add_object(NODE_POOLS, nodepool("shanghai", json!([])));
        for (name, pool) in [
            ("n1", Some("hangzhou")),
            ("n2", Some("shanghai")),
            ("n3", Some("hangzhou")),
            ("n4", None),
        ] {
            host.add_object(NODES, node(name, pool));
        }
        assert_eq!(members("hangzhou"), set(&["n1", "n3"]));
        assert_eq!(members("shanghai"), set(&["n2"]));
    }

    #[test]
    fn unknown_pools_have_no_members_and_bad_names_make_no_selector() {
        let host = Host::install();
        host.add_object(NODES, node("n1", Some("hangzhou")));
        assert_eq!(members("beijing"), None);
        assert_eq!(
            members("a,b=c"),
            None,
            "would otherwise trap in the selector parser"
        );
        assert_eq!(members(""), None);
    }
}
