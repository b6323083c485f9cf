//! The little of an object the gateway itself needs (name, namespace, resourceVersion,
//! labels), read without building the whole document: serde skips every other field.

use std::borrow::Cow;
use std::collections::BTreeMap;

use edgegate_filter_sdk::Object;
use serde::Deserialize;

use super::FrameError;

/// An object's metadata, borrowed from its bytes where no unescaping was needed.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Meta<'a> {
    /// `metadata.name`.
    #[serde(borrow, default)]
    pub name: Cow<'a, str>,
    /// `metadata.namespace`; empty for cluster-scoped objects.
    #[serde(borrow, default)]
    pub namespace: Cow<'a, str>,
    /// `metadata.resourceVersion`.
    #[serde(borrow, default, rename = "resourceVersion")]
    pub resource_version: Cow<'a, str>,
    /// `metadata.labels`.
    #[serde(borrow, default)]
    pub labels: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
    /// `metadata.continue`, on lists.
    #[serde(borrow, default, rename = "continue")]
    pub continue_token: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    metadata: Meta<'a>,
}

impl<'a> Meta<'a> {
    /// Reads the metadata of an object or a list.
    pub fn parse(bytes: &'a [u8]) -> Result<Meta<'a>, FrameError> {
        serde_json::from_slice::<Head<'a>>(bytes)
            .map(|head| head.metadata)
            .map_err(|_| FrameError::BadObject)
    }

    /// [`Meta::parse`] for bytes already checked to be a JSON object (a watch event's object,
    /// which the framer parsed; an object the cache stored): scans only as far as the end
    /// of `metadata`, which Kubernetes writes first or nearly so.
    pub fn parse_checked(bytes: &'a [u8]) -> Result<Meta<'a>, FrameError> {
        match Object::field_range(bytes, "metadata") {
            Some(range) => serde_json::from_slice(&bytes[range]).map_err(|_| FrameError::BadObject),
            None => Meta::parse(bytes),
        }
    }

    /// `namespace/name`, or `name` for cluster-scoped objects: the key a client's store uses.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.to_string()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

/// Compares two resourceVersions: they are opaque strings to clients, but kube-apiserver
/// backed by etcd issues decimal numbers, so when both parse they are compared as numbers.
/// `None` when they cannot be ordered.
pub fn compare_versions(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    let (a, b) = (a.parse::<u64>().ok()?, b.parse::<u64>().ok()?);
    Some(a.cmp(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_metadata_and_skips_the_rest() {
        let bytes = br#"{"kind":"Pod","spec":{"containers":[{"name":"c"}]},"metadata":{"name":"p","namespace":"ns","resourceVersion":"17","labels":{"app":"web","tier":"fe\u0021"},"uid":"u"}}"#;
        let meta = Meta::parse(bytes).unwrap();
        assert_eq!(meta.name, "p");
        assert_eq!(meta.namespace, "ns");
        assert_eq!(meta.resource_version, "17");
        assert_eq!(meta.labels.get("tier").map(|v| v.as_ref()), Some("fe!"));
        assert_eq!(meta.key(), "ns/p");
        assert!(matches!(meta.name, Cow::Borrowed(_)));
    }

    #[test]
    fn cluster_scoped_and_list_metadata() {
        let node = Meta::parse(br#"{"metadata":{"name":"edge-1"}}"#).unwrap();
        assert_eq!(node.key(), "edge-1");
        let list = Meta::parse(
            br#"{"kind":"PodList","metadata":{"resourceVersion":"5","continue":"abc"},"items":[]}"#,
        )
        .unwrap();
        assert_eq!(
            (list.resource_version.as_ref(), list.continue_token.as_ref()),
            ("5", "abc")
        );
        assert!(Meta::parse(b"[1,2]").is_err());
        assert!(Meta::parse(br#"{"metadata":{"name":7}}"#).is_err());
    }

    #[test]
    fn checked_objects_are_read_up_to_their_metadata() {
        let objects: [&[u8]; 5] = [
            br#"{"kind":"Pod","spec":{"s":"}\"{","a":[1,{"b":[]}]},"metadata":{"name":"p","namespace":"ns","resourceVersion":"17"},"status":{}}"#,
            br#" { "apiVersion" : "v1" , "n" : -1.5e3 , "t" : true , "metadata" : { "name" : "q" } } "#,
            br#"{"metadata":{"name":"r","labels":{"a":"\u0021"}}}"#,
            br#"{"kind":"Node"}"#,
            br#"{"metad\u0061ta":{"name":"escaped"}}"#,
        ];
        for bytes in objects {
            assert_eq!(
                Meta::parse_checked(bytes).unwrap(),
                Meta::parse(bytes).unwrap(),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        // Only as far as metadata: what follows it is not read.
        let rest_unread = br#"{"metadata":{"name":"p"},"spec":"#;
        assert_eq!(Meta::parse_checked(rest_unread).unwrap().name, "p");
        assert!(Meta::parse_checked(b"[1,2]").is_err());
        assert!(Meta::parse_checked(br#"{"metadata":{"name":7}}"#).is_err());
    }

    #[test]
    fn resource_versions_compare_as_numbers() {
        use std::cmp::Ordering::*;
        assert_eq!(compare_versions("9", "10"), Some(Less));
        assert_eq!(compare_versions("10", "10"), Some(Equal));
        assert_eq!(compare_versions("abc", "10"), None);
    }
}
