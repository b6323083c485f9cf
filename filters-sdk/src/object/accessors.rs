//! The typed accessors of an [`Object`]: its identity, labels, annotations, and `spec` and
//! `status` fields by path.

use std::collections::BTreeMap;

use serde_json::Value;

use super::value::into_string;
use super::{Keys, Object};

impl Object {
    /// `apiVersion`.
    pub fn api_version(&self) -> Option<&str> {
        self.lookup(&["apiVersion"])?.as_str()
    }

    /// `kind`.
    pub fn kind(&self) -> Option<&str> {
        self.lookup(&["kind"])?.as_str()
    }

    /// Sets `kind`.
    pub fn set_kind(&mut self, kind: &str) {
        self.set("kind", kind.into());
    }

    /// `metadata.name`.
    pub fn name(&self) -> Option<&str> {
        self.string_at(&["metadata", "name"])
    }

    /// Sets `metadata.name`.
    pub fn set_name(&mut self, name: &str) {
        self.set_string(&["metadata", "name"], name);
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> Option<&str> {
        self.string_at(&["metadata", "namespace"])
    }

    /// Sets `metadata.namespace`.
    pub fn set_namespace(&mut self, namespace: &str) {
        self.set_string(&["metadata", "namespace"], namespace);
    }

    /// Whether this is the object `namespace/name`.
    pub fn is_named(&self, namespace: &str, name: &str) -> bool {
        self.namespace() == Some(namespace) && self.name() == Some(name)
    }

    /// `metadata.resourceVersion` (which a filter must never change).
    pub fn resource_version(&self) -> Option<&str> {
        self.string_at(&["metadata", "resourceVersion"])
    }

    /// One label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.string_at(&["metadata", "labels", key])
    }

    /// All labels (string values only).
    pub fn labels(&self) -> BTreeMap<&str, &str> {
        self.strings_at(&["metadata", "labels"])
    }

    /// Sets a label. Only `labels` is re-encoded: the rest of `metadata` (its
    /// `managedFields`, the other annotations) is copied as it came.
    pub fn set_label(&mut self, key: &str, value: &str) {
        self.set_string(&["metadata", "labels", key], value);
    }

    /// Removes a label, returning its value (`None` when it was not a string). Only `labels`
    /// is re-encoded, and nothing at all when there was no such label.
    pub fn remove_label(&mut self, key: &str) -> Option<String> {
        into_string(self.remove_at(&["metadata", "labels", key])?)
    }

    /// One annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.string_at(&["metadata", "annotations", key])
    }

    /// All annotations (string values only).
    pub fn annotations(&self) -> BTreeMap<&str, &str> {
        self.strings_at(&["metadata", "annotations"])
    }
    /// Sets an annotation. Only `annotations` is re-encoded, its other entries copied as
    /// they came (a `last-applied-configuration` is never unescaped).
    pub fn set_annotation(&mut self, key: &str, value: &str) {
        self.set_string(&["metadata", "annotations", key], value);
    }

    /// Removes an annotation, returning its value (`None` when it was not a string). Only
    /// `annotations` is re-encoded, and nothing at all when there was no such annotation.
    pub fn remove_annotation(&mut self, key: &str) -> Option<String> {
        into_string(self.remove_at(&["metadata", "annotations", key])?)
    }

    /// A field of `spec` by path (`clusterIP`, `ports.0.port`).
    pub fn spec(&self, path: &str) -> Option<&Value> {
        self.lookup(&Keys::of(Some("spec"), path))
    }

    /// A field of `spec` by path, to change.
    pub fn spec_mut(&mut self, path: &str) -> Option<&mut Value> {
        self.get_mut_at(&Keys::of(Some("spec"), path))
    }

    /// Sets a field of `spec` by path, creating missing objects on the way.
    pub fn set_spec(&mut self, path: &str, value: Value) -> bool {
        self.set_at(&Keys::of(Some("spec"), path), value)
    }

    /// A field of `status` by path.
    pub fn status(&self, path: &str) -> Option<&Value> {
        self.lookup(&Keys::of(Some("status"), path))
    }

    /// A field of `status` by path, to change.
    pub fn status_mut(&mut self, path: &str) -> Option<&mut Value> {
        self.get_mut_at(&Keys::of(Some("status"), path))
    }

    /// Sets a field of `status` by path, creating missing objects on the way.
    pub fn set_status(&mut self, path: &str, value: Value) -> bool {
        self.set_at(&Keys::of(Some("status"), path), value)
    }
}
