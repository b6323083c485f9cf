//! A list item or a watch event's object made into an object the shared state holds.

use bytes::{Bytes, BytesMut};
use edgegate_json_scan::field_ranges;

use crate::node::multiplexer::state::ListType;
use crate::stream::held;

/// A list item with the `kind` and `apiVersion` of its list's items, which a watch event's
/// object carries and a list's items do not; [`owned`] either way.
pub(crate) fn typed(item: Bytes, list: &ListType) -> Bytes {
    let kind = list.kind.strip_suffix("List").unwrap_or_default();
    if kind.is_empty() || !matches!(field_ranges(&item, &[], ["kind"]), Some([None])) {
        return owned(&item);
    }
    let mut typed = BytesMut::with_capacity(item.len() + kind.len() + list.api_version.len() + 32);
    typed.extend_from_slice(b"{\"kind\":");
    typed.extend_from_slice(&serde_json::to_vec(kind).unwrap_or_default());
    typed.extend_from_slice(b",\"apiVersion\":");
    typed.extend_from_slice(&serde_json::to_vec(&list.api_version).unwrap_or_default());
    let Some(open) = item.iter().position(|b| *b == b'{') else {
        return owned(&item);
    };
    let rest = &item[open + 1..];
    if rest.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'}') {
        typed.extend_from_slice(b",");
    }
    typed.extend_from_slice(rest);
    owned(&typed)
}

/// An object's bytes in an allocation of their own, for the state to hold. The framers cut
/// items and events out of the buffer a response is read into, so a slice of it held for as
/// long as its object does not change would keep the whole buffer, and every other object
/// read into it, as long: a copy of a few KiB per change against memory that grows with the
/// churn. The copy is [`held`], so the watch streams that show the object share it.
pub(super) fn owned(bytes: &[u8]) -> Bytes {
    held(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_items_get_their_kind_and_api_version() {
        let list = ListType {
            kind: "ServiceList".into(),
            api_version: "v1".into(),
        };
        let item = Bytes::from_static(br#"{"metadata":{"name":"a"}}"#);
        assert_eq!(
            typed(item, &list),
            Bytes::from_static(br#"{"kind":"Service","apiVersion":"v1","metadata":{"name":"a"}}"#)
        );
        let typed_already = Bytes::from_static(br#"{"metadata":{},"kind":"Service"}"#);
        assert_eq!(typed(typed_already.clone(), &list), typed_already);
        assert_eq!(
            typed(Bytes::from_static(b"{ }"), &list),
            Bytes::from_static(br#"{"kind":"Service","apiVersion":"v1" }"#)
        );
    }

    #[test]
    fn held_objects_keep_no_buffer_they_were_cut_from() {
        let list = ListType {
            kind: "ServiceList".into(),
            api_version: "v1".into(),
        };
        let buffer = Bytes::from_static(
            br#"[{"metadata":{"name":"a"}},{"kind":"Service","metadata":{"name":"b"}}]"#,
        );
        let inside = |bytes: &Bytes| buffer.as_ptr_range().contains(&bytes.as_ptr());
        let (untyped, typed_already) = (buffer.slice(1..26), buffer.slice(27..69));
        assert!(inside(&untyped) && inside(&typed_already));
        for item in [untyped, typed_already] {
            let held = typed(item.clone(), &list);
            assert!(
                !inside(&held),
                "{item:?} is held in the buffer it was read into"
            );
        }
        assert!(!inside(&owned(&buffer.slice(27..69))));
    }
}
