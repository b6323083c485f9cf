//! An object's `metadata.resourceVersion` as bytes: set in place (the object's fields stay
//! in their order and spelling), and left out when two objects are compared or hashed, so
//! that the same object sent again at a newer version reads as the same.

use std::hash::Hasher;
use std::ops::Range;

use bytes::{Bytes, BytesMut};
use edgegate_json_scan::field_ranges;

/// Where the value of `metadata.resourceVersion` (with its quotes) lies in an object's JSON.
fn range(object: &[u8]) -> Option<Range<usize>> {
    match field_ranges(object, &["metadata"], ["resourceVersion"]) {
        Some([Some(range)]) => Some(range),
        _ => None,
    }
}

/// The object's bytes before and after its resourceVersion's value (all of them first when
/// it has none).
fn around(object: &[u8]) -> (&[u8], &[u8]) {
    match range(object) {
        Some(range) => (&object[..range.start], &object[range.end..]),
        None => (object, &[]),
    }
}

/// `object` with `metadata.resourceVersion` set to `version`, its other bytes as they were;
/// `None` when it has no resourceVersion to set or does not read as an object that far.
pub fn with_version(object: &Bytes, version: &str) -> Option<Bytes> {
    let range = range(object)?;
    let value = serde_json::to_vec(version).ok()?;
    if object[range.clone()] == value[..] {
        return Some(object.clone());
    }
    let mut out = BytesMut::with_capacity(object.len() + value.len());
    out.extend_from_slice(&object[..range.start]);
    out.extend_from_slice(&value);
    out.extend_from_slice(&object[range.end..]);
    Some(out.freeze())
}

/// Whether two objects are the same bytes but for their resourceVersions.
pub fn same_but_version(a: &[u8], b: &[u8]) -> bool {
    around(a) == around(b)
}

/// A hash of an object's bytes but its resourceVersion.
pub fn hash_but_version(object: &[u8], hasher: &mut impl Hasher) {
    let (before, after) = around(object);
    hasher.write(before);
    hasher.write_u8(0);
    hasher.write(after);
}

#[cfg(test)]
mod tests {
    use super::*;

    const OBJECT: &[u8] =
        br#"{"kind":"EndpointSlice","metadata":{"name":"s","resourceVersion":"7","labels":{"b":"1","a":"2"}},"endpoints":[]}"#;

    #[test]
    fn the_version_is_set_in_place() {
        let set = with_version(&Bytes::from_static(OBJECT), "12").unwrap();
        assert_eq!(
            &set[..],
            br#"{"kind":"EndpointSlice","metadata":{"name":"s","resourceVersion":"12","labels":{"b":"1","a":"2"}},"endpoints":[]}"#
        );
        assert!(with_version(&Bytes::from_static(br#"{"metadata":{"name":"s"}}"#), "1").is_none());
        assert!(with_version(&Bytes::from_static(b"[1]"), "1").is_none());
    }

    #[test]
    fn objects_compare_and_hash_but_for_their_version() {
        let hash = |object: &[u8]| {
            let mut hasher = std::hash::DefaultHasher::new();
            hash_but_version(object, &mut hasher);
            hasher.finish()
        };
        let newer = with_version(&Bytes::from_static(OBJECT), "900").unwrap();
        assert!(same_but_version(OBJECT, &newer));
        assert_eq!(hash(OBJECT), hash(&newer));
        let edited = br#"{"kind":"EndpointSlice","metadata":{"name":"s","resourceVersion":"7","labels":{"b":"1","a":"3"}},"endpoints":[]}"#;
        assert!(!same_but_version(OBJECT, edited));
        assert_ne!(hash(OBJECT), hash(edited));
    }
}
