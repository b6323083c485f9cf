//! [`Item`]: one item of an array that [`super::Object::retain_items`] and
//! [`super::Object::position`] hand their predicates,
//! as its bytes and its top-level fields, found in the same scan that split the array. A
//! field is parsed only when read, so placing an endpoint by its `nodeName` reads that one
//! string of it.

use std::borrow::Cow;
use std::ops::{ControlFlow, Range};

use serde_json::Value;

use super::key::FieldRange;
use super::split;

/// Hands `read` the items of the array `text`, each with its fields, all found in one scan
/// before the first is handed; `None` when `text` is not an array.
pub(super) fn with_items<R>(
    text: &[u8],
    read: impl FnOnce(&mut dyn Iterator<Item = Item<'_>>) -> R,
) -> Option<R> {
    // Sized for Kubernetes items (an endpoint, a port): a field every 16 bytes or so, an item
    // every 64, so that splitting a list of them grows neither.
    let mut fields = Vec::with_capacity(text.len() / 16);
    let mut items = Vec::with_capacity(text.len() / 64);
    split::items_and_fields(text, &mut fields, |item, own, _| {
        items.push((item, own));
        ControlFlow::Continue(())
    })?;
    let mut items = items
        .into_iter()
        .map(|(range, own)| Item::split(text, range, &fields[own]));
    Some(read(&mut items))
}

/// The index of the first item of the array `text` that `accept` accepts; `None` when none
/// does or `text` is not an array up to it. The items after it are not read: finding the
/// port named `https` scans the ports up to it.
pub(super) fn position_in_text(
    text: &[u8],
    accept: &mut dyn FnMut(&Item) -> bool,
) -> Option<usize> {
    let mut fields = Vec::new();
    let (mut index, mut found) = (0, None);
    split::items_and_fields(text, &mut fields, |item, own, all| {
        if accept(&Item::split(text, item, &all[own])) {
            found = Some(index);
            return ControlFlow::Break(());
        }
        index += 1;
        ControlFlow::Continue(())
    })?;
    found
}

/// [`position_in_text`] on a parsed value, each item handed as its JSON text.
pub(super) fn position_in_value(
    value: Option<&Value>,
    accept: &mut dyn FnMut(&Item) -> bool,
) -> Option<usize> {
    let Some(Value::Array(items)) = value else {
        return None;
    };
    items
        .iter()
        .position(|item| accept(&Item::from_json(item.to_string().as_bytes())))
}

/// One item of an array, unparsed: its JSON text and, when it is an object, its fields.
#[derive(Debug)]
pub struct Item<'a> {
    bytes: &'a [u8],
    range: Range<usize>,
    fields: Cow<'a, [FieldRange]>,
}

impl<'a> Item<'a> {
    /// The item at `range` of `bytes`, with the fields found while splitting it.
    pub(super) fn split(
        bytes: &'a [u8],
        range: Range<usize>,
        fields: &'a [FieldRange],
    ) -> Item<'a> {
        Item {
            bytes,
            range,
            fields: Cow::Borrowed(fields),
        }
    }

    /// The item whose JSON text is `bytes`, its fields split now.
    pub(super) fn from_json(bytes: &'a [u8]) -> Item<'a> {
        let mut fields = Vec::new();
        if split::object_fields(bytes, 0..bytes.len(), &mut fields).is_none() {
            fields.clear();
        }
        Item {
            bytes,
            range: 0..bytes.len(),
            fields: Cow::Owned(fields),
        }
    }

    /// The item's JSON text as it came, unchecked.
    pub fn json(&self) -> &'a [u8] {
        &self.bytes[self.range.clone()]
    }

    /// The item's JSON text; `None` when it is not UTF-8.
    pub fn text(&self) -> Option<&'a str> {
        std::str::from_utf8(self.json()).ok()
    }

    /// The unparsed JSON text of the item's top-level field `key`; `None` when the item is not
    /// an object or has no such field.
    pub fn field_json(&self, key: &str) -> Option<&'a [u8]> {
        let bytes = self.bytes;
        self.fields
            .iter()
            .find(|(name, _)| name.is(bytes, key))
            .and_then(|(_, value)| bytes.get(value.clone()))
    }

    /// The item's top-level field `key` when it is a string (unescaped only if it holds
    /// escapes); `None` when it is missing or anything else.
    pub fn string(&self, key: &str) -> Option<Cow<'a, str>> {
        let json = self.field_json(key)?;
        if json.contains(&b'\\') {
            serde_json::from_slice::<String>(json).ok().map(Cow::Owned)
        } else {
            serde_json::from_slice::<&str>(json).ok().map(Cow::Borrowed)
        }
    }

    /// The item's top-level field `key` when it is an object, as an item of its own; `None`
    /// when it is missing, anything else, or does not split.
    pub fn object(&self, key: &str) -> Option<Item<'a>> {
        let json = self.field_json(key)?;
        json.starts_with(b"{").then(|| Item::from_json(json))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_found_by_key_and_parsed_only_when_read() {
        let json = br#" { "a": {"nodeName": "no"}, "b" : [1, "]"], "node\u004eame": "n\u0031", "z": tail}"#;
        let item = Item::from_json(json);
        assert_eq!(item.field_json("b"), Some(&br#"[1, "]"]"#[..]));
        assert_eq!(
            item.string("nodeName"),
            Some(Cow::Owned("n1".into())),
            "an escaped key matches, the nested key is not the item's, an escaped value is unescaped"
        );
        assert_eq!(
            item.field_json("z"),
            Some(&b"tail"[..]),
            "a value is not checked until read"
        );
        assert_eq!(item.string("z"), None, "and then it is");
        assert_eq!(
            item.object("a").and_then(|a| a.string("nodeName")),
            Some("no".into())
        );
        assert!(item.object("b").is_none());

        let plain = Item::from_json(br#"{"nodeName": "n1"}"#);
        assert!(matches!(
            plain.string("nodeName"),
            Some(Cow::Borrowed("n1"))
        ));
        assert_eq!(plain.text(), Some(r#"{"nodeName": "n1"}"#));
        for json in [
            &br#"{"nodeName": 7}"#[..],
            br#"{"nodeName": "n1}"#,
            br#"["nodeName", "n1"]"#,
            b"null",
        ] {
            assert_eq!(Item::from_json(json).string("nodeName"), None, "{json:?}");
        }
        assert_eq!(Item::from_json(b"\"\xff\"").text(), None);
    }
}
