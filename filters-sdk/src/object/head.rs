//! An object's head: identity, labels and annotations, read without building the whole
//! value. Unknown fields are skipped (still checked as JSON), so reading the head of a 2 KB
//! object allocates a few short strings instead of a tree.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `apiVersion`, `kind` and the string fields and maps of `metadata` that filters read most.
#[derive(Clone, Debug, Default, Deserialize)]
pub(super) struct Head {
    #[serde(rename = "apiVersion")]
    pub(super) api_version: Option<String>,
    pub(super) kind: Option<String>,
    #[serde(default)]
    pub(super) metadata: Option<HeadMetadata>,
}

/// The part of `metadata` a [`Head`] holds.
#[derive(Clone, Debug, Default, Deserialize)]
pub(super) struct HeadMetadata {
    pub(super) name: Option<String>,
    pub(super) namespace: Option<String>,
    #[serde(rename = "resourceVersion")]
    pub(super) resource_version: Option<String>,
    pub(super) labels: Option<BTreeMap<String, String>>,
    pub(super) annotations: Option<BTreeMap<String, String>>,
}

impl Head {
    /// Reads the head of JSON object bytes; `None` when the bytes are not JSON or do not have
    /// the shape a Kubernetes object's head has (the caller then parses the whole value).
    pub(super) fn read(bytes: &[u8]) -> Option<Head> {
        // A struct also deserializes from a JSON array; only an object is an object.
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' {
            return None;
        }
        serde_json::from_slice(bytes).ok()
    }

    /// `metadata`, when present.
    pub(super) fn metadata(&self) -> Option<&HeadMetadata> {
        self.metadata.as_ref()
    }
}
