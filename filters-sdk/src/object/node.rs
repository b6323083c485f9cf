//! [`Node`]: one JSON value kept as a range of an object's bytes, split into its entries
//! (when it is an object) or parsed only as far as a reader reaches. Reading
//! `metadata.annotations.x` splits `metadata` and `annotations` and parses the one string
//! `x`; the other annotations, however large, are skipped, never unescaped or built.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::ops::Range;

use serde_json::Value;

use super::split;

/// One entry of an object: its key and its value.
pub(super) type Entry = (Key, Node);

/// An entry's key: its range of the bytes when it holds no escape, else its unescaped text.
#[derive(Clone, Debug)]
pub(super) enum Key {
    /// The key's text lies here in the object's bytes (quotes excluded).
    Raw(Range<usize>),
    /// The key, unescaped.
    Owned(String),
}

impl Key {
    /// Whether this is `key`.
    pub(super) fn is(&self, bytes: &[u8], key: &str) -> bool {
        match self {
            Key::Raw(raw) => bytes.get(raw.clone()) == Some(key.as_bytes()),
            Key::Owned(owned) => owned == key,
        }
    }

    /// The key's text; `None` when the bytes are not UTF-8.
    pub(super) fn text<'a>(&'a self, bytes: &'a [u8]) -> Option<&'a str> {
        match self {
            Key::Raw(raw) => std::str::from_utf8(bytes.get(raw.clone())?).ok(),
            Key::Owned(owned) => Some(owned),
        }
    }
}

/// One value of the original bytes: its range, its entries once split, its value once parsed.
#[derive(Clone, Debug)]
pub(super) struct Node {
    raw: Range<usize>,
    /// The object's entries, in order; `None` when the value is not an object.
    children: OnceCell<Option<Vec<Entry>>>,
    /// The whole value, parsed on first need; it then answers for everything below.
    value: OnceCell<Value>,
}

impl Node {
    /// A value lying at `raw` in the object's bytes.
    pub(super) fn new(raw: Range<usize>) -> Node {
        Node {
            raw,
            children: OnceCell::new(),
            value: OnceCell::new(),
        }
    }

    /// An object lying at `raw`, whose entries were split already.
    pub(super) fn split(raw: Range<usize>, children: Vec<Entry>) -> Node {
        Node {
            raw,
            children: OnceCell::from(Some(children)),
            value: OnceCell::new(),
        }
    }

    /// A value that lay at `raw`, parsed or set already: it answers from now on.
    pub(super) fn holding(raw: Range<usize>, value: Value) -> Node {
        Node {
            raw,
            children: OnceCell::from(None),
            value: OnceCell::from(value),
        }
    }

    /// Where the value lies in the object's bytes.
    pub(super) fn raw(&self) -> Range<usize> {
        self.raw.clone()
    }

    /// The whole value, parsed from `bytes` (the object's bytes) on first need.
    pub(super) fn value(&self, bytes: &[u8]) -> &Value {
        self.value
            .get_or_init(|| split::parse(&bytes[self.raw.clone()]))
    }

    /// The whole value, to change.
    pub(super) fn value_mut(&mut self, bytes: &[u8]) -> &mut Value {
        self.value(bytes);
        match self.value.get_mut() {
            Some(value) => value,
            None => unreachable!("the value was just parsed"),
        }
    }

    /// A copy of the whole value, parsed (and not kept) if it was not.
    pub(super) fn to_value(&self, bytes: &[u8]) -> Value {
        match self.value.get() {
            Some(value) => value.clone(),
            None => split::parse(&bytes[self.raw.clone()]),
        }
    }

    /// The whole value, parsed if it was not.
    pub(super) fn into_value(self, bytes: &[u8]) -> Value {
        match self.value.into_inner() {
            Some(value) => value,
            None => split::parse(&bytes[self.raw]),
        }
    }

    /// The value, if it was parsed.
    pub(super) fn parsed(&self) -> Option<&Value> {
        self.value.get()
    }

    /// The value below this one at `keys` (a number indexes an array), parsing only what
    /// lies on the way.
    pub(super) fn lookup<'a>(&'a self, bytes: &[u8], keys: &[&str]) -> Option<&'a Value> {
        match self.find(bytes, keys) {
            Found::Node(node) => Some(node.value(bytes)),
            Found::Value(value) => value,
        }
    }

    /// The string entries of the object below this one at `keys` (empty when it is missing
    /// or not an object); a key given twice keeps its last value.
    pub(super) fn strings_at<'a>(
        &'a self,
        bytes: &'a [u8],
        keys: &[&str],
    ) -> BTreeMap<&'a str, &'a str> {
        match self.find(bytes, keys) {
            Found::Node(node) => node
                .children(bytes)
                .into_iter()
                .flatten()
                .filter_map(|(key, node)| Some((key.text(bytes)?, node.value(bytes).as_str()?)))
                .collect(),
            Found::Value(value) => collect_strings(value),
        }
    }

    /// What lies below this one at `keys`: an unparsed node, or a value already parsed (or
    /// none), splitting only the objects on the way.
    fn find<'a>(&'a self, bytes: &[u8], keys: &[&str]) -> Found<'a> {
        if let Some(value) = self.value.get() {
            return Found::Value(walk(value, keys));
        }
        let Some((key, rest)) = keys.split_first() else {
            return Found::Node(self);
        };
        match self.children(bytes) {
            Some(children) => match child(children, bytes, key) {
                Some(node) => node.find(bytes, rest),
                None => Found::Value(None),
            },
            None => Found::Value(walk(self.value(bytes), keys)),
        }
    }

    /// Whether the value at `keys` below this one was parsed (or a value above it was).
    #[cfg(test)]
    pub(super) fn is_parsed_at(&self, bytes: &[u8], keys: &[&str]) -> bool {
        let below = |key: &str, rest: &[&str]| {
            let children = self.children.get().and_then(|children| children.as_deref());
            children
                .and_then(|children| child(children, bytes, key))
                .is_some_and(|node| node.is_parsed_at(bytes, rest))
        };
        match keys.split_first() {
            _ if self.value.get().is_some() => true,
            None => false,
            Some((key, rest)) => below(key, rest),
        }
    }

    /// Whether the entries were split already.
    #[cfg(test)]
    pub(super) fn is_split(&self) -> bool {
        self.children.get().is_some_and(Option::is_some)
    }

    /// The entries, split from `bytes` on first need; `None` when the value is not an object.
    fn children(&self, bytes: &[u8]) -> Option<&[Entry]> {
        self.children
            .get_or_init(|| split::entries(bytes, self.raw.clone()))
            .as_deref()
    }
}

/// What a path leads to: a node not parsed yet, or a value in one that was.
enum Found<'a> {
    Node(&'a Node),
    Value(Option<&'a Value>),
}

/// The node of `key`; a key given twice answers with its last value, as a full parse would.
fn child<'a>(children: &'a [Entry], bytes: &[u8], key: &str) -> Option<&'a Node> {
    children
        .iter()
        .rev()
        .find(|(k, _)| k.is(bytes, key))
        .map(|(_, node)| node)
}

/// The value below `value` at `keys`.
pub(super) fn walk<'a>(value: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(value, |value, key| match value {
        Value::Object(map) => map.get(*key),
        Value::Array(items) => items.get(key.parse::<usize>().ok()?),
        _ => None,
    })
}

/// The string entries of an object value.
pub(super) fn collect_strings(value: Option<&Value>) -> BTreeMap<&str, &str> {
    value
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const BYTES: &[u8] =
        br#"{"labels": {"a": "1", "n": 2, "a": "3"}, "ports": [{"port": 443}], "big": "x\"y"}"#;

    fn root() -> Node {
        Node::new(0..BYTES.len())
    }

    #[test]
    fn a_lookup_parses_only_the_leaf_it_reaches() {
        let node = root();
        assert_eq!(node.lookup(BYTES, &["labels", "a"]), Some(&json!("3")));
        assert_eq!(
            node.lookup(BYTES, &["ports", "0", "port"]),
            Some(&json!(443))
        );
        assert_eq!(node.lookup(BYTES, &["labels", "a", "x"]), None);
        assert_eq!(node.lookup(BYTES, &["nothing"]), None);
        assert!(node.parsed().is_none());
        let children = node.children(BYTES).unwrap();
        assert!(
            children
                .iter()
                .find(|(k, _)| k.is(BYTES, "big"))
                .unwrap()
                .1
                .parsed()
                .is_none()
        );
        assert!(
            children[0].1.parsed().is_none(),
            "labels was split, not parsed"
        );
    }

    #[test]
    fn string_maps_skip_other_values_and_keep_the_last_duplicate() {
        let node = root();
        let labels = BTreeMap::from([("a", "3")]);
        assert_eq!(node.strings_at(BYTES, &["labels"]), labels);
        assert_eq!(node.strings_at(BYTES, &["ports"]), BTreeMap::new());
        assert_eq!(node.strings_at(BYTES, &["missing"]), BTreeMap::new());
        node.value(BYTES);
        assert_eq!(
            node.strings_at(BYTES, &["labels"]),
            labels,
            "the value agrees"
        );
    }
}
