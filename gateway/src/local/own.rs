//! The node's own objects: what the node may write locally while the cloud is away, and
//! which part of the object a write reaches (a status write changes the status, a write of
//! the object everything else), as kube-apiserver's strategies for Pods and Nodes allow.

use serde_json::{Map, Value};

use crate::request::RequestInfo;

/// A kind of the node's own objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Own {
    /// This node's Node.
    Node,
    /// A pod bound to this node (`spec.nodeName`), mirror pods included.
    Pod,
}

impl Own {
    /// The kind of own object `info` writes, by its path alone, for node `node`; `None` for
    /// anything else (a pod's ownership is then checked on the object: [`Own::owns`]).
    pub fn of(info: &RequestInfo, node: &str) -> Option<Own> {
        let whole_or_status = info.subresource.is_empty() || info.subresource == "status";
        if !(info.api_group.is_empty() && info.api_version == "v1" && whole_or_status) {
            return None;
        }
        match info.resource.as_str() {
            "nodes" if info.name == node && info.namespace.is_empty() => Some(Own::Node),
            "pods" if !info.name.is_empty() && !info.namespace.is_empty() => Some(Own::Pod),
            _ => None,
        }
    }

    /// The object's `kind`.
    pub fn kind(self) -> &'static str {
        match self {
            Own::Node => "Node",
            Own::Pod => "Pod",
        }
    }

    /// Whether `object` (as the cache holds it) is this node's: a pod must be bound to it.
    pub fn owns(self, object: &Value, node: &str) -> bool {
        match self {
            Own::Node => true,
            Own::Pod => object["spec"]["nodeName"].as_str() == Some(node),
        }
    }
}

/// The object a write leaves, from the object as it was (`before`) and as the write made it
/// (`after`): a status write (`status`) keeps all but the status and the labels and
/// annotations of `before`; any other keeps its status (and a pod its node). The identity of the object (name,
/// namespace, uid, creation, generation) is never written; `kind` and `apiVersion` are set.
pub fn written(own: Own, status: bool, before: &Value, mut after: Value) -> Value {
    if status {
        let mut kept = before.clone();
        kept["status"] = after["status"].take();
        for field in ["labels", "annotations"] {
            match after["metadata"][field].take() {
                Value::Null => drop(metadata(&mut kept).remove(field)),
                value => drop(metadata(&mut kept).insert(field.to_owned(), value)),
            }
        }
        after = kept;
    } else {
        after["status"] = before["status"].clone();
        if own == Own::Pod {
            // A pod stays bound where it was: kube-apiserver refuses to move it.
            after["spec"]["nodeName"] = before["spec"]["nodeName"].clone();
        }
    }
    for field in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "generation",
    ] {
        match before["metadata"].get(field) {
            Some(value) => drop(metadata(&mut after).insert(field.to_owned(), value.clone())),
            None => drop(metadata(&mut after).remove(field)),
        }
    }
    if let Value::Object(object) = &mut after {
        object.insert("kind".to_owned(), own.kind().into());
        object.insert("apiVersion".to_owned(), "v1".into());
    }
    after
}

/// The metadata of `object`, made a map if it is not one.
fn metadata(object: &mut Value) -> &mut Map<String, Value> {
    if !object["metadata"].is_object() {
        object["metadata"] = Value::Object(Map::new());
    }
    match &mut object["metadata"] {
        Value::Object(metadata) => metadata,
        _ => unreachable!("made a map above"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::request::RequestInfo;

    fn info(method: &str, path: &str) -> RequestInfo {
        RequestInfo::parse(&method.parse().unwrap(), path, None)
    }

    #[test]
    fn only_this_nodes_node_and_pods_are_its_own() {
        let own = |path| Own::of(&info("PATCH", path), "edge-1");
        assert_eq!(own("/api/v1/nodes/edge-1/status"), Some(Own::Node));
        assert_eq!(own("/api/v1/nodes/edge-1"), Some(Own::Node));
        assert_eq!(own("/api/v1/nodes/edge-2/status"), None);
        assert_eq!(own("/api/v1/namespaces/a/pods/p/status"), Some(Own::Pod));
        assert_eq!(own("/api/v1/namespaces/a/pods/p/eviction"), None);
        assert_eq!(own("/api/v1/namespaces/a/services/s"), None);
        assert_eq!(own("/api/v1/namespaces/a/configmaps/c"), None);
        let pod = |node: &str| json!({"spec": {"nodeName": node}});
        assert!(Own::Pod.owns(&pod("edge-1"), "edge-1"));
        assert!(!Own::Pod.owns(&pod("edge-2"), "edge-1"));
        assert!(!Own::Pod.owns(&json!({"spec": {}}), "edge-1"));
    }

    #[test]
    fn a_status_write_changes_the_status_and_no_write_changes_the_identity() {
        let before = json!({
            "metadata": {"name": "p", "namespace": "a", "uid": "u", "labels": {"x": "1"}},
            "spec": {"nodeName": "edge-1"},
            "status": {"phase": "Pending"},
        });
        let after = json!({
            "metadata": {"name": "q", "uid": "v", "labels": {"x": "2"}},
            "spec": {"nodeName": "edge-2", "activeDeadlineSeconds": 5},
            "status": {"phase": "Running"},
        });
        let status = written(Own::Pod, true, &before, after.clone());
        assert_eq!(status["status"]["phase"], "Running");
        assert_eq!(status["spec"]["nodeName"], "edge-1");
        assert_eq!(status["metadata"]["labels"]["x"], "2");
        assert_eq!(status["metadata"]["name"], "p");
        assert_eq!(status["metadata"]["uid"], "u");
        assert_eq!(
            (status["kind"].as_str(), status["apiVersion"].as_str()),
            (Some("Pod"), Some("v1"))
        );
        let whole = written(Own::Pod, false, &before, after);
        assert_eq!(whole["status"]["phase"], "Pending");
        assert_eq!(whole["spec"]["nodeName"], "edge-1");
        assert_eq!(whole["spec"]["activeDeadlineSeconds"], 5);
        assert_eq!(whole["metadata"]["namespace"], "a");
    }
}
