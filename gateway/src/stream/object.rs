//! The little of an object the gateway itself needs (name, namespace, resourceVersion, and
//! labels where a cached read selects by them), read without building the whole document.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use edgegate_json_scan::field_ranges;
use serde::Deserialize;

use super::error::FrameError;

/// An object's identity and version, borrowed from its bytes where no unescaping was needed.
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
}

/// An object's labels, borrowed where no unescaping was needed.
pub type Labels<'a> = BTreeMap<Cow<'a, str>, Cow<'a, str>>;

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    metadata: Meta<'a>,
}

/// The fields of `metadata` that [`Meta`] holds, in its order.
const FIELDS: [&str; 3] = ["name", "namespace", "resourceVersion"];

impl<'a> Meta<'a> {
    /// Reads the name, namespace and resourceVersion of an object (a list's resourceVersion).
    pub fn parse(bytes: &'a [u8]) -> Result<Meta<'a>, FrameError> {
        serde_json::from_slice::<Head<'a>>(bytes)
            .map(|head| head.metadata)
            .map_err(|_| FrameError::BadObject)
    }

    /// [`Meta::parse`] for bytes already checked to be a JSON object (a watch event's object,
    /// which the framer parsed; an object the cache stored): a scan that skips values
    /// without reading them finds `metadata`, which Kubernetes writes first or nearly so,
    /// and reads it only as far as the last of the three fields, which come before
    /// `labels`, `annotations` and `managedFields` in a namespaced object as kube-apiserver
    /// writes it. A field given twice before then is refused, as the parse refuses it.
    pub fn parse_checked(bytes: &'a [u8]) -> Result<Meta<'a>, FrameError> {
        let Some([name, namespace, resource_version]) = field_ranges(bytes, &["metadata"], FIELDS)
        else {
            // Not objects, or a field given twice: the parse says which, and refuses both.
            return Meta::parse(bytes);
        };
        let string = |range: Option<Range<usize>>| {
            range.map_or(Ok(Cow::Borrowed("")), |range| string(&bytes[range]))
        };
        Ok(Meta {
            name: string(name)?,
            namespace: string(namespace)?,
            resource_version: string(resource_version)?,
        })
    }

    /// Whether `bytes` read whole as [`Meta::parse`] reads them, with the metadata
    /// [`Meta::parse_checked`] finds in them: what an object read by that scan alone must be
    /// before it is kept.
    pub fn reads_whole(bytes: &[u8]) -> bool {
        matches!(
            (Meta::parse(bytes), Meta::parse_checked(bytes)),
            (Ok(whole), Ok(scanned)) if whole == scanned
        )
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

/// A JSON string's text, borrowed when it holds no escape; an error for any other value.
fn string(text: &[u8]) -> Result<Cow<'_, str>, FrameError> {
    match text {
        [b'"', inner @ .., b'"'] if !inner.contains(&b'\\') => std::str::from_utf8(inner)
            .map(Cow::Borrowed)
            .map_err(|_| FrameError::BadObject),
        _ => serde_json::from_slice(text).map_err(|_| FrameError::BadObject),
    }
}

/// Reads the `metadata.labels` of an object already checked to be JSON (one the cache
/// stored): the scan [`Meta::parse_checked`] uses finds them, and only they are parsed.
pub fn labels(bytes: &[u8]) -> Result<Labels<'_>, FrameError> {
    match field_ranges(bytes, &["metadata"], ["labels"]) {
        Some([Some(range)]) => {
            serde_json::from_slice(&bytes[range]).map_err(|_| FrameError::BadObject)
        }
        Some([None]) => Ok(Labels::new()),
        None => Err(FrameError::BadObject),
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
        let of_pod = labels(bytes).unwrap();
        assert_eq!(of_pod.get("tier").map(|v| v.as_ref()), Some("fe!"));
        assert_eq!(of_pod.len(), 2);
        assert!(labels(br#"{"kind":"Node"}"#).unwrap().is_empty());
        assert!(labels(br#"{"metadata":{"labels":{"a":1}}}"#).is_err());
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
        assert_eq!(list.resource_version, "5");
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
        // Only as far as the last of the three fields.
        let labels_unread =
            br#"{"metadata":{"name":"n","namespace":"ns","resourceVersion":"1","labels":{"a":]}}"#;
        assert_eq!(
            Meta::parse_checked(labels_unread).unwrap().resource_version,
            "1"
        );
        assert!(Meta::parse_checked(b"[1,2]").is_err());
        assert!(Meta::parse_checked(br#"{"metadata":{"name":7}}"#).is_err());
        assert!(Meta::parse_checked(br#"{"metadata":{"name":null}}"#).is_err());
        assert!(
            Meta::parse_checked(br#"{"metadata":{"name":"a","name":"b"}}"#).is_err(),
            "a name given twice is refused, as the parse refuses it"
        );
    }

    #[test]
    fn an_object_scanned_for_its_metadata_reads_whole_only_as_the_parse_reads_it() {
        let whole: [&[u8]; 3] = [
            br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"17","labels":{"a":"b"}},"spec":{"x":[1,2.5e3,null]}}"#,
            br#"{"kind":"Node","metadata":{"n\u0061me":"a\"b"}}"#,
            br#"{"kind":"Node"}"#,
        ];
        for bytes in whole {
            assert!(
                Meta::reads_whole(bytes),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        let not_whole: [&[u8]; 6] = [
            // Past the metadata the scan stops at.
            br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"1","labels":{"a":]}}"#,
            br#"{"metadata":{"name":"p"},"spec":"#,
            br#"{"metadata":{"name":"p"}} trailing"#,
            // A field given twice after the scan has what it looks for: the parse refuses it.
            br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"1","name":"q"}}"#,
            br#"{"metadata":{"name":"p"},"metadata":{"name":"q"}}"#,
            b"[1,2]",
        ];
        for bytes in not_whole {
            assert!(
                !Meta::reads_whole(bytes),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn checked_metadata_is_read_as_the_parse_reads_it() {
        let objects: [&[u8]; 6] = [
            br#"{"metadata":{"name":"p","generateName":"p-","namespace":"ns","uid":"u","resourceVersion":"17","labels":{"name":"x"},"annotations":{"namespace":"}\"{"},"managedFields":[{"manager":"m","fieldsV1":{"f:metadata":{"f:name":{}}}}]}}"#,
            br#"{"metadata":{"n\u0061me":"a\"b\\c\u00e9","namespace":"\u006es","resourceVersion":"9"}}"#,
            br#"{"metadata":{"resourceVersion":"5","continue":"tok=="},"items":[]}"#,
            br#"{"metadata":{}}"#,
            "{\"metadata\":{\"name\":\"caf\u{e9}-\u{1F600}\"}}".as_bytes(),
            br#"{"metadata":{"labels":{"a":"b"},"name":"after-labels"}}"#,
        ];
        for bytes in objects {
            let checked = Meta::parse_checked(bytes).unwrap();
            assert_eq!(
                checked,
                Meta::parse(bytes).unwrap(),
                "{}",
                String::from_utf8_lossy(bytes)
            );
            if !bytes.contains(&b'\\') {
                assert!(matches!(checked.name, Cow::Borrowed(_)));
            }
        }
    }

    #[test]
    fn resource_versions_compare_as_numbers() {
        use std::cmp::Ordering::*;
        assert_eq!(compare_versions("9", "10"), Some(Less));
        assert_eq!(compare_versions("10", "10"), Some(Equal));
        assert_eq!(compare_versions("abc", "10"), None);
    }
}
