//! [`Object`]: one Kubernetes object, parsed once, with typed accessors for what filters
//! touch: identity, labels, annotations, and `spec`/`status` fields by path.
//!
//! Parsing is lazy: an object made from bytes reads only its head (identity, labels,
//! annotations) up front, and builds the whole JSON value the first time a filter asks for
//! anything else. A filter that decides on a name or a label never pays for the rest, and an
//! object left unchanged encodes back to its original bytes.
//!
//! A path is a dot-separated list of keys, where a number indexes an array:
//! `ports.0.port` is the first port's `port`. Keys that contain a dot are reached through
//! [`Object::value`] or [`Object::value_mut`].

mod head;

use std::cell::OnceCell;
use std::collections::BTreeMap;

use serde_json::{Map, Value};
use thiserror::Error;

use head::Head;

/// Why bytes are not an object.
#[derive(Debug, Error)]
pub enum ObjectError {
    /// The bytes are not JSON.
    #[error("not JSON: {0}")]
    Parse(#[from] serde_json::Error),
    /// The JSON is not an object.
    #[error("not a JSON object")]
    NotAnObject,
}

/// A Kubernetes object: its bytes and head, and its JSON value once needed.
#[derive(Clone, Debug)]
pub struct Object {
    /// The bytes it was read from (empty for an object made from a value).
    raw: Vec<u8>,
    /// The head read from `raw`; stale once `value` is built, which then answers.
    head: Head,
    /// The whole value, built on first need.
    value: OnceCell<Value>,
}

impl PartialEq for Object {
    fn eq(&self, other: &Object) -> bool {
        self.value() == other.value()
    }
}

impl Object {
    /// Reads JSON bytes: checks they are one JSON object and reads its head.
    pub fn from_slice(bytes: &[u8]) -> Result<Object, ObjectError> {
        Object::from_vec(bytes.to_vec())
    }

    /// [`Object::from_slice`] on bytes it keeps, without copying them.
    pub fn from_vec(bytes: Vec<u8>) -> Result<Object, ObjectError> {
        match Head::read(&bytes) {
            Some(head) => Ok(Object {
                raw: bytes,
                head,
                value: OnceCell::new(),
            }),
            // Not the usual shape (or not JSON): the whole parse says which, or accepts it.
            None => Object::from_value(serde_json::from_slice(&bytes)?),
        }
    }

    /// Wraps a JSON value, which must be an object.
    pub fn from_value(value: Value) -> Result<Object, ObjectError> {
        if !value.is_object() {
            return Err(ObjectError::NotAnObject);
        }
        Ok(Object {
            raw: Vec::new(),
            head: Head::default(),
            value: OnceCell::from(value),
        })
    }

    /// The whole object.
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| parse_whole(&self.raw))
    }

    /// The whole object, to change.
    pub fn value_mut(&mut self) -> &mut Value {
        if self.value.get().is_none() {
            let value = parse_whole(&self.raw);
            self.value = OnceCell::from(value);
        }
        match self.value.get_mut() {
            Some(value) => value,
            None => unreachable!("the value was just built"),
        }
    }

    /// The object's JSON value.
    pub fn into_value(self) -> Value {
        let Object { raw, value, .. } = self;
        value.into_inner().unwrap_or_else(|| parse_whole(&raw))
    }

    /// The object encoded as JSON: its original bytes if its value was never built.
    pub fn to_vec(&self) -> Vec<u8> {
        match self.value.get() {
            // Encoding a Value (string keys only) cannot fail.
            Some(value) => serde_json::to_vec(value).unwrap_or_default(),
            None => self.raw.clone(),
        }
    }

    /// `apiVersion`.
    pub fn api_version(&self) -> Option<&str> {
        match self.value.get() {
            Some(value) => value.get("apiVersion")?.as_str(),
            None => self.head.api_version.as_deref(),
        }
    }

    /// `kind`.
    pub fn kind(&self) -> Option<&str> {
        match self.value.get() {
            Some(value) => value.get("kind")?.as_str(),
            None => self.head.kind.as_deref(),
        }
    }

    /// Sets `kind`.
    pub fn set_kind(&mut self, kind: &str) {
        self.root_mut().insert("kind".into(), kind.into());
    }

    /// `metadata.name`.
    pub fn name(&self) -> Option<&str> {
        match self.value.get() {
            Some(_) => self.metadata()?.get("name")?.as_str(),
            None => self.head.metadata()?.name.as_deref(),
        }
    }

    /// Sets `metadata.name`.
    pub fn set_name(&mut self, name: &str) {
        self.metadata_mut().insert("name".into(), name.into());
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> Option<&str> {
        match self.value.get() {
            Some(_) => self.metadata()?.get("namespace")?.as_str(),
            None => self.head.metadata()?.namespace.as_deref(),
        }
    }

    /// Sets `metadata.namespace`.
    pub fn set_namespace(&mut self, namespace: &str) {
        self.metadata_mut()
            .insert("namespace".into(), namespace.into());
    }

    /// Whether this is the object `namespace/name`.
    pub fn is_named(&self, namespace: &str, name: &str) -> bool {
        self.namespace() == Some(namespace) && self.name() == Some(name)
    }

    /// `metadata.resourceVersion` (which a filter must never change).
    pub fn resource_version(&self) -> Option<&str> {
        match self.value.get() {
            Some(_) => self.metadata()?.get("resourceVersion")?.as_str(),
            None => self.head.metadata()?.resource_version.as_deref(),
        }
    }

    /// One label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        match self.value.get() {
            Some(_) => self.string_map("labels")?.get(key)?.as_str(),
            None => head_entry(self.head.metadata()?.labels.as_ref()?, key),
        }
    }

    /// All labels (string values only).
    pub fn labels(&self) -> BTreeMap<&str, &str> {
        match self.value.get() {
            Some(_) => collect_strings(self.string_map("labels")),
            None => head_map(self.head.metadata().and_then(|m| m.labels.as_ref())),
        }
    }

    /// Sets a label.
    pub fn set_label(&mut self, key: &str, value: &str) {
        self.string_map_mut("labels")
            .insert(key.into(), value.into());
    }

    /// Removes a label, returning its value.
    pub fn remove_label(&mut self, key: &str) -> Option<String> {
        remove_string(self.string_map_mut("labels"), key)
    }

    /// One annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        match self.value.get() {
            Some(_) => self.string_map("annotations")?.get(key)?.as_str(),
            None => head_entry(self.head.metadata()?.annotations.as_ref()?, key),
        }
    }

    /// All annotations (string values only).
    pub fn annotations(&self) -> BTreeMap<&str, &str> {
        match self.value.get() {
            Some(_) => collect_strings(self.string_map("annotations")),
            None => head_map(self.head.metadata().and_then(|m| m.annotations.as_ref())),
        }
    }

    /// Sets an annotation.
    pub fn set_annotation(&mut self, key: &str, value: &str) {
        self.string_map_mut("annotations")
            .insert(key.into(), value.into());
    }

    /// Removes an annotation, returning its value.
    pub fn remove_annotation(&mut self, key: &str) -> Option<String> {
        remove_string(self.string_map_mut("annotations"), key)
    }

    /// A field of `spec` by path (`clusterIP`, `ports.0.port`).
    pub fn spec(&self, path: &str) -> Option<&Value> {
        self.get(&format!("spec.{path}"))
    }

    /// A field of `spec` by path, to change.
    pub fn spec_mut(&mut self, path: &str) -> Option<&mut Value> {
        self.get_mut(&format!("spec.{path}"))
    }

    /// Sets a field of `spec` by path, creating missing objects on the way.
    pub fn set_spec(&mut self, path: &str, value: Value) -> bool {
        self.set(&format!("spec.{path}"), value)
    }

    /// A field of `status` by path.
    pub fn status(&self, path: &str) -> Option<&Value> {
        self.get(&format!("status.{path}"))
    }

    /// A field of `status` by path, to change.
    pub fn status_mut(&mut self, path: &str) -> Option<&mut Value> {
        self.get_mut(&format!("status.{path}"))
    }

    /// Sets a field of `status` by path, creating missing objects on the way.
    pub fn set_status(&mut self, path: &str, value: Value) -> bool {
        self.set(&format!("status.{path}"), value)
    }

    /// Any field by path from the root (`metadata.ownerReferences.0.kind`).
    pub fn get(&self, path: &str) -> Option<&Value> {
        path.split('.')
            .try_fold(self.value(), |value, key| match value {
                Value::Object(map) => map.get(key),
                Value::Array(items) => items.get(key.parse::<usize>().ok()?),
                _ => None,
            })
    }

    /// Any field by path from the root, to change.
    pub fn get_mut(&mut self, path: &str) -> Option<&mut Value> {
        path.split('.')
            .try_fold(self.value_mut(), |value, key| match value {
                Value::Object(map) => map.get_mut(key),
                Value::Array(items) => items.get_mut(key.parse::<usize>().ok()?),
                _ => None,
            })
    }

    /// Sets any field by path, creating missing objects on the way (never array items).
    /// Returns false, changing nothing, when the path runs through a scalar or past an
    /// array's end.
    pub fn set(&mut self, path: &str, value: Value) -> bool {
        let (parent_path, last) = match path.rsplit_once('.') {
            Some((parent, last)) => (Some(parent), last),
            None => (None, path),
        };
        let mut parent = self.value_mut();
        if let Some(parent_path) = parent_path {
            for key in parent_path.split('.') {
                parent = match parent {
                    Value::Object(map) => {
                        map.entry(key).or_insert_with(|| Value::Object(Map::new()))
                    }
                    Value::Array(items) => {
                        match key.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                            Some(item) => item,
                            None => return false,
                        }
                    }
                    _ => return false,
                };
            }
        }
        match parent {
            Value::Object(map) => {
                map.insert(last.to_owned(), value);
                true
            }
            Value::Array(items) => {
                match last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                    Some(item) => {
                        *item = value;
                        true
                    }
                    None => false,
                }
            }
            _ => false,
        }
    }

    /// Sets any field by path, as [`Object::set`] does, unless it already holds `value`.
    /// Returns whether the object changed, so a filter can answer [`crate::Decision::Keep`]
    /// (and spare the re-encoding) when it did not.
    pub fn update(&mut self, path: &str, value: Value) -> bool {
        self.get(path) != Some(&value) && self.set(path, value)
    }

    fn root_mut(&mut self) -> &mut Map<String, Value> {
        let root = self.value_mut();
        if !root.is_object() {
            *root = Value::Object(Map::new());
        }
        match root {
            Value::Object(map) => map,
            // Made an object just above.
            _ => unreachable!("the root was just made an object"),
        }
    }

    fn metadata(&self) -> Option<&Map<String, Value>> {
        self.value().get("metadata")?.as_object()
    }

    fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        object_entry(self.root_mut(), "metadata")
    }

    fn string_map(&self, key: &str) -> Option<&Map<String, Value>> {
        self.metadata()?.get(key)?.as_object()
    }

    fn string_map_mut(&mut self, key: &str) -> &mut Map<String, Value> {
        object_entry(self.metadata_mut(), key)
    }
}

/// The object under `key`, made (or made anew, if it held something else) as needed.
fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(map) => map,
        _ => unreachable!("the entry was just made an object"),
    }
}

/// The whole value of bytes whose head was read, so they are known to be a JSON object.
fn parse_whole(raw: &[u8]) -> Value {
    match serde_json::from_slice(raw) {
        Ok(value) => value,
        Err(error) => panic!("an object whose head was read does not parse whole: {error}"),
    }
}

fn head_entry<'a>(map: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    map.get(key).map(String::as_str)
}

fn head_map(map: Option<&BTreeMap<String, String>>) -> BTreeMap<&str, &str> {
    map.into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

fn collect_strings(map: Option<&Map<String, Value>>) -> BTreeMap<&str, &str> {
    map.into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        .collect()
}

fn remove_string(map: &mut Map<String, Value>, key: &str) -> Option<String> {
    match map.remove(key)? {
        Value::String(value) => Some(value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn service() -> Object {
        Object::from_value(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7",
                         "labels": {"app": "web"}},
            "spec": {"clusterIP": "10.0.0.1", "ports": [{"name": "https", "port": 443}]}
        }))
        .unwrap()
    }

    #[test]
    fn identity_and_metadata_maps() {
        let mut object = service();
        assert_eq!(object.kind(), Some("Service"));
        assert_eq!(object.name(), Some("web"));
        assert_eq!(object.namespace(), Some("default"));
        assert_eq!(object.resource_version(), Some("7"));
        assert_eq!(object.label("app"), Some("web"));
        assert_eq!(object.annotation("x"), None);
        object.set_annotation("x", "1");
        object.set_label("tier", "front");
        assert_eq!(object.annotations().get("x"), Some(&"1"));
        assert_eq!(object.labels().len(), 2);
        assert_eq!(object.remove_label("app").as_deref(), Some("web"));
        assert_eq!(object.label("app"), None);
        object.set_name("api");
        object.set_namespace("prod");
        object.set_kind("Thing");
        assert_eq!(
            (object.name(), object.namespace(), object.kind()),
            (Some("api"), Some("prod"), Some("Thing"))
        );
    }

    #[test]
    fn paths_reach_into_objects_and_arrays() {
        let mut object = service();
        assert_eq!(object.spec("clusterIP"), Some(&json!("10.0.0.1")));
        assert_eq!(object.spec("ports.0.port"), Some(&json!(443)));
        assert_eq!(object.spec("ports.1.port"), None);
        assert_eq!(object.spec("clusterIP.x"), None);
        *object.spec_mut("ports.0.port").unwrap() = json!(10268);
        assert_eq!(object.get("spec.ports.0.port"), Some(&json!(10268)));
        assert!(object.set_status("loadBalancer.ingress", json!([])));
        assert_eq!(object.status("loadBalancer.ingress"), Some(&json!([])));
        assert!(object.set_spec("ports.0.name", json!("h")));
        assert_eq!(object.spec("ports.0.name"), Some(&json!("h")));
        assert!(!object.set_spec("ports.5.name", json!("h")));
        assert!(!object.set_spec("clusterIP.inner", json!(1)));
    }

    #[test]
    fn update_reports_only_real_changes() {
        let mut object = service();
        assert!(object.is_named("default", "web"));
        assert!(!object.is_named("kube-system", "web"));
        assert!(!object.update("spec.clusterIP", json!("10.0.0.1")));
        assert!(object.update("spec.clusterIP", json!("169.254.2.1")));
        assert_eq!(object.spec("clusterIP"), Some(&json!("169.254.2.1")));
        assert!(object.update("spec.clusterIPs", json!(["169.254.2.1"])));
        assert!(!object.update("spec.clusterIP.inner", json!(1)), "no path");
    }

    #[test]
    fn only_json_objects_are_objects() {
        assert!(matches!(
            Object::from_slice(b"[1]"),
            Err(ObjectError::NotAnObject)
        ));
        assert!(matches!(
            Object::from_slice(b"{"),
            Err(ObjectError::Parse(_))
        ));
        let object = Object::from_slice(br#"{"kind":"Pod"}"#).unwrap();
        assert_eq!(Object::from_slice(&object.to_vec()).unwrap(), object);
    }

    #[test]
    fn the_head_answers_until_the_value_is_needed() {
        let bytes = br#"{"kind": "Service", "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7", "labels": {"app": "web"}, "annotations": {"a": "1"}}, "spec": {"type": "ClusterIP"}}"#;
        let mut object = Object::from_slice(bytes).unwrap();
        assert_eq!(
            (object.kind(), object.name(), object.namespace()),
            (Some("Service"), Some("web"), Some("default"))
        );
        assert_eq!(object.resource_version(), Some("7"));
        assert_eq!(object.label("app"), Some("web"));
        assert_eq!(object.annotations(), BTreeMap::from([("a", "1")]));
        assert!(
            object.value.get().is_none(),
            "identity and maps come from the head"
        );
        assert_eq!(object.to_vec(), bytes, "unchanged, the original bytes");

        assert_eq!(object.spec("type"), Some(&Value::from("ClusterIP")));
        object.set_label("app", "api");
        object.set_name("api");
        assert_eq!(
            (object.name(), object.label("app")),
            (Some("api"), Some("api"))
        );
        let written: Value = serde_json::from_slice(&object.to_vec()).unwrap();
        assert_eq!(written["metadata"]["labels"]["app"], "api");
    }

    #[test]
    fn an_unusual_head_falls_back_to_the_whole_value() {
        // A label that is not a string does not fit the head; the object is still read.
        let object =
            Object::from_slice(br#"{"metadata":{"name":"x","labels":{"n":1,"s":"v"}}}"#).unwrap();
        assert_eq!(object.name(), Some("x"));
        assert_eq!(object.label("n"), None);
        assert_eq!(object.labels(), BTreeMap::from([("s", "v")]));
        assert!(matches!(
            Object::from_slice(b" [null, null, null]"),
            Err(ObjectError::NotAnObject)
        ));
    }
}
