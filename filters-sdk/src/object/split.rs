//! Splitting an object's bytes into its entries, each a [`Node`] over a range of those bytes.
//! The top level is split in one scan that also splits `metadata`, so reading a name or a
//! label costs one pass over the object and no second pass over its metadata.

use std::fmt;
use std::ops::Range;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::node::Node;

/// The entries of the JSON object `bytes`, in order, `metadata` already split into its own.
pub(super) fn top_level(bytes: &[u8]) -> Result<Vec<(String, Node)>, serde_json::Error> {
    let whole = 0..bytes.len();
    match scan(bytes, whole.clone(), true) {
        Ok(entries) => Ok(entries),
        // `metadata` is not an object: split again, leaving it to be parsed as it is.
        Err(_) => scan(bytes, whole, false),
    }
}

/// The entries of the value at `raw` in `bytes`; `None` when it is not an object.
pub(super) fn entries(bytes: &[u8], raw: Range<usize>) -> Option<Vec<(String, Node)>> {
    let text = &bytes[raw.clone()];
    if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    scan(bytes, raw, false).ok()
}

/// A value from its JSON text. Splitting checked the bytes are JSON; the few things only a
/// full parse rejects (a lone surrogate escape in a string) make this panic, which in a
/// filter traps the call so the host applies the failure policy.
pub(super) fn parse(text: &[u8]) -> Value {
    match serde_json::from_slice(text) {
        Ok(value) => value,
        Err(error) => panic!("a field of the object does not parse: {error}"),
    }
}

fn scan(
    bytes: &[u8],
    raw: Range<usize>,
    split_metadata: bool,
) -> Result<Vec<(String, Node)>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(&bytes[raw.clone()]);
    let entries = Entries {
        bytes,
        from: raw.start,
        split_metadata,
    }
    .deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(entries)
}

/// Reads a JSON object's entries as nodes over `bytes`, into which the text read points.
struct Entries<'b> {
    bytes: &'b [u8],
    /// Where the object's text starts in `bytes`.
    from: usize,
    /// Whether to split a `metadata` entry in the same scan.
    split_metadata: bool,
}

impl<'de> DeserializeSeed<'de> for Entries<'_> {
    type Value = Vec<(String, Node)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Entries<'_> {
    type Value = Vec<(String, Node)>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(8));
        // The end of the text read so far: the opening brace, then each value's end.
        let mut end = self.from + leading_space(&self.bytes[self.from..]);
        while let Some(key) = map.next_key::<String>()? {
            let node = if self.split_metadata && key == "metadata" {
                let nested = Entries {
                    bytes: self.bytes,
                    from: end,
                    split_metadata: false,
                };
                let children = map.next_value_seed(nested)?;
                let last = children.last().map(|(_, node)| node.raw().end);
                let raw = object_range(self.bytes, end, last)
                    .ok_or_else(|| A::Error::custom("metadata's extent not found"))?;
                Node::split(raw, children)
            } else {
                let value: &RawValue = map.next_value()?;
                Node::new(self.range(value))
            };
            end = node.raw().end;
            entries.push((key, node));
        }
        Ok(entries)
    }
}

impl Entries<'_> {
    /// Where text read from `bytes` lies in them.
    fn range(&self, value: &RawValue) -> Range<usize> {
        let start = value.get().as_ptr().addr() - self.bytes.as_ptr().addr();
        start..start + value.get().len()
    }
}

/// The range of an object value whose key follows `after` (an opening brace or the end of
/// the previous value), given the end of its last entry's value: `{` after the key and its
/// colon, to the `}` after that entry. `None` if the text is not shaped so, which valid
/// JSON already read never is.
fn object_range(bytes: &[u8], after: usize, last: Option<usize>) -> Option<Range<usize>> {
    let mut at = skip_space(bytes, after);
    if !matches!(bytes.get(at)?, b'{' | b',') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    at = skip_string(bytes, at)?;
    at = skip_space(bytes, at);
    if *bytes.get(at)? != b':' {
        return None;
    }
    let start = skip_space(bytes, at + 1);
    if *bytes.get(start)? != b'{' {
        return None;
    }
    let close = skip_space(bytes, last.unwrap_or(start + 1));
    (*bytes.get(close)? == b'}').then_some(start..close + 1)
}

/// The end of the JSON string starting at `at`.
fn skip_string(bytes: &[u8], at: usize) -> Option<usize> {
    if *bytes.get(at)? != b'"' {
        return None;
    }
    let mut i = at + 1;
    loop {
        match *bytes.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

fn skip_space(bytes: &[u8], at: usize) -> usize {
    at + bytes.get(at..).map_or(0, leading_space)
}

fn leading_space(text: &[u8]) -> usize {
    text.iter().take_while(|b| b.is_ascii_whitespace()).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<'a>(bytes: &'a [u8], node: &Node) -> &'a str {
        std::str::from_utf8(&bytes[node.raw()]).unwrap()
    }

    #[test]
    fn metadata_is_split_in_the_same_scan_whatever_the_spacing() {
        for bytes in [
            &br#"{"kind":"A","metadata":{"name":"n","labels":{"a":"b"}},"spec":{}}"#[..],
            br#" { "m\"eta" : 1 ,
                "metadata"  :  { "name" : "n" , "labels" : { "a" : "b" }  } , "spec" : { } } "#,
            br#"{"metadata":{}}"#,
        ] {
            let entries = top_level(bytes).unwrap();
            let (_, metadata) = entries.iter().find(|(k, _)| k == "metadata").unwrap();
            let inner = text(bytes, metadata);
            assert!(inner.starts_with('{') && inner.ends_with('}'), "{inner}");
            let whole: Value = serde_json::from_slice(bytes).unwrap();
            assert_eq!(metadata.value(bytes), &whole["metadata"]);
            assert_eq!(
                metadata.lookup(bytes, &["labels", "a"]),
                whole["metadata"].pointer("/labels/a")
            );
        }
    }

    #[test]
    fn a_metadata_that_is_no_object_is_left_whole() {
        let bytes = br#"{"metadata": [1, 2], "kind": "A"}"#;
        let entries = top_level(bytes).unwrap();
        assert_eq!(text(bytes, &entries[0].1), "[1, 2]");
        assert_eq!(entries[0].1.lookup(bytes, &["0"]), Some(&Value::from(1)));
    }

    #[test]
    fn only_objects_split() {
        assert!(top_level(b"[1, 2]").is_err());
        assert!(top_level(b"{\"a\": }").is_err());
        assert!(top_level(b"{\"a\": 1} x").is_err());
        assert!(entries(b"[1]", 0..3).is_none());
        assert_eq!(object_range(b"{\"k\":[]}", 0, None), None);
    }
}
