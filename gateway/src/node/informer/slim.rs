//! An informer's object as it is read off a list page or a watch event: the few metadata
//! fields the watcher and the informers read, and its JSON as lookups hand it to filters,
//! without what no lookup reads. Each object is made so as it is deserialized, one at a
//! time. kube's watcher holds a whole list page at once (the whole list, from a watch cache
//! that ignores `limit`): as trees of fields (`DynamicObject`), a large list took much of
//! the gateway's peak heap at the informers' first list, and the heap kept the pages they
//! had shared with what it holds. Read so, the peak is barely above what the gateway keeps
//! (measured: benches/HISTORY.md, "Measurements behind choices in the code").

use std::borrow::Cow;

use bytes::Bytes;
use kube::api::{ApiResource, ObjectMeta};
use kube::core::DynamicResourceScope;
use kube::core::Resource;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// Annotations written by tools for their own bookkeeping: no filter reads them, and
/// `kubectl apply` rewrites the first on every apply (which would have every apply of a
/// Service announced as a change).
const BOOKKEEPING_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// One object of an informer's kind.
#[derive(Clone, Debug)]
pub(crate) struct SlimObject {
    /// Its metadata as the watcher and the informers read it.
    pub(crate) metadata: ObjectMeta,
    /// Its JSON without the bookkeeping annotations and `managedFields` (the fields each
    /// writer set, most of what the informers held when they kept trees of fields; measured:
    /// benches/HISTORY.md, "Measurements behind choices in the code").
    pub(crate) json: Bytes,
    /// `status.nodes` as JSON, when it has them (a NodePool's members).
    pub(crate) members: Option<String>,
}

impl SlimObject {
    /// The object made from its JSON tree, less what no lookup reads.
    fn from_tree(mut object: Map<String, Value>) -> Result<SlimObject, serde_json::Error> {
        if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
            metadata.remove("managedFields");
            if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
                annotations.retain(|key, _| !BOOKKEEPING_ANNOTATIONS.contains(&key.as_str()));
            }
        }
        let metadata = match object.get("metadata") {
            Some(metadata) => ObjectMeta::deserialize(metadata)?,
            None => ObjectMeta::default(),
        };
        let members = object
            .get("status")
            .and_then(|status| status.get("nodes"))
            .map(Value::to_string);
        // Written into a vector that doubles as it grows: held as it is, it would keep up to
        // twice the JSON's bytes for as long as the object lives.
        let mut json = serde_json::to_vec(&object)?;
        json.shrink_to_fit();
        let json = json.into();
        Ok(SlimObject {
            metadata,
            json,
            members,
        })
    }
}

impl<'de> Deserialize<'de> for SlimObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let tree = Map::<String, Value>::deserialize(deserializer)?;
        SlimObject::from_tree(tree).map_err(serde::de::Error::custom)
    }
}

impl Resource for SlimObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {
                "name": "web", "namespace": "default", "resourceVersion": "7",
                "labels": {"app": "web"},
                "annotations": {
                    "openyurt.io/topologyKeys": "openyurt.io/nodepool",
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"Service\"}",
                },
                "managedFields": [{"manager": "kubectl", "operation": "Apply",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {"ports": [{"port": 80}]},
        })
    }

    #[test]
    fn an_object_keeps_neither_managed_fields_nor_bookkeeping_annotations() {
        let object: SlimObject = serde_json::from_value(service()).unwrap();
        let json: Value = serde_json::from_slice(&object.json).unwrap();
        assert_eq!(json["metadata"].get("managedFields"), None);
        assert_eq!(
            json["metadata"]["annotations"],
            serde_json::json!({"openyurt.io/topologyKeys": "openyurt.io/nodepool"})
        );
        assert_eq!(json["metadata"]["labels"]["app"], "web");
        assert_eq!(json["spec"]["ports"][0]["port"], 80);
        assert_eq!(json["kind"], "Service");
        assert_eq!(object.metadata.name.as_deref(), Some("web"));
        assert_eq!(object.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(object.metadata.managed_fields, None);
        let annotations = object.metadata.annotations.unwrap();
        assert_eq!(annotations.len(), 1, "{annotations:?}");
        assert_eq!(object.members, None);
    }

    #[test]
    fn an_objects_json_takes_no_more_room_than_its_bytes() {
        let object: SlimObject = serde_json::from_value(service()).unwrap();
        let json = object
            .json
            .try_into_mut()
            .expect("the JSON is the object's own");
        assert_eq!(json.capacity(), json.len());
    }

    #[test]
    fn list_pages_and_watch_events_are_read_object_by_object() {
        let page = serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceList",
            "metadata": {"resourceVersion": "9"},
            "items": [service(), service()],
        });
        let page: kube::core::ObjectList<SlimObject> =
            serde_json::from_slice(page.to_string().as_bytes()).unwrap();
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.metadata.resource_version.as_deref(), Some("9"));
        // The object before the type, as a decoder may meet them.
        let event = format!(r#"{{"object":{},"type":"MODIFIED"}}"#, service());
        let event: kube::api::WatchEvent<SlimObject> = serde_json::from_str(&event).unwrap();
        let kube::api::WatchEvent::Modified(object) = event else {
            panic!("not a MODIFIED event");
        };
        assert_eq!(object.metadata.name.as_deref(), Some("web"));
    }

    #[test]
    fn a_node_pool_keeps_its_members() {
        let pool = serde_json::json!({
            "apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
            "metadata": {"name": "hangzhou"},
            "status": {"nodes": ["edge-1", "edge-2"]},
        });
        let pool: SlimObject = serde_json::from_value(pool).unwrap();
        assert_eq!(pool.members.as_deref(), Some(r#"["edge-1","edge-2"]"#));
    }

    #[test]
    fn an_object_that_is_not_a_map_is_refused() {
        assert!(serde_json::from_str::<SlimObject>("[1]").is_err());
        let bad_meta = serde_json::json!({"metadata": {"name": 3}});
        assert!(serde_json::from_value::<SlimObject>(bad_meta).is_err());
    }
}
