//! An object's top-level fields (`metadata`, `spec`, `endpoints`, …), each kept as a range
//! of the original bytes until a filter reads or edits it. Reading a field parses only what
//! the read reaches; encoding re-encodes only what edits reached (see [`Node::write`]) and
//! copies the rest byte for byte, so pruning a slice's `endpoints` never touches its
//! `metadata`.

use std::cell::OnceCell;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::item::{Item, with_items};
use super::node::Node;
use super::split;
use super::value::encode;

/// The top-level fields of one JSON object, in their original order. Those up to and
/// including `metadata` are split on the first read that needs them; the rest (`spec`, `endpoints`,
/// …) only when a read reaches past `metadata`, or an edit or an encoding needs them all.
/// Kubernetes writes `metadata` third, so a filter that decides by name, labels or
/// annotations never scans the body of what it keeps. A key given twice has its last value,
/// as in a full parse.
#[derive(Clone, Debug)]
pub(super) struct Fields {
    fields: Vec<Field>,
    /// The fields after `metadata` while they are not in `fields` yet.
    rest: Option<Rest>,
    /// Whether a field was removed, so that the object is re-encoded without it.
    removed: bool,
}

/// The fields after `metadata`: where they begin, and the fields once split.
#[derive(Clone, Debug)]
struct Rest {
    at: usize,
    fields: OnceCell<Vec<Field>>,
}

/// One top-level field.
#[derive(Clone, Debug)]
struct Field {
    key: String,
    /// The value: over a range of the original bytes, or of `own` once set, or (for a field
    /// a filter added) holding its value from the start.
    node: Node,
    /// The value's bytes after an edit made on bytes ([`Fields::retain_items`]).
    own: Option<Vec<u8>>,
    /// Whether a filter reached for the value to change it; only such fields are re-encoded.
    edited: bool,
}

impl Fields {
    /// Splits the bytes of one JSON object into its fields up to `metadata` (and `metadata`
    /// into its own, in the same scan); `None` when they do not begin as an object.
    // Out of line: inlined into `Object`'s lazy split, the wasm build ran the split slower
    // (measured: benches/HISTORY.md, "Measurements behind choices in the code").
    #[inline(never)]
    pub(super) fn split(bytes: &[u8]) -> Option<Fields> {
        let (entries, rest) = split::head(bytes)?;
        let mut fields = Vec::with_capacity(entries.len() + 4);
        add(&mut fields, bytes, entries)?;
        Some(Fields {
            fields,
            rest: rest.map(|at| Rest {
                at,
                fields: OnceCell::new(),
            }),
            removed: false,
        })
    }

    /// Splits the fields after `metadata` into the others, if they were not yet.
    fn complete(&mut self, bytes: &[u8]) {
        let Some(rest) = self.rest.take() else {
            return;
        };
        let later = match rest.fields.into_inner() {
            Some(later) => later,
            None => split_rest(bytes, rest.at),
        };
        for field in later {
            match self.fields.iter_mut().find(|old| old.key == field.key) {
                Some(old) => *old = field,
                None => self.fields.push(field),
            }
        }
    }

    /// The value at `keys` (the first a top-level key), parsing only what lies on the way.
    pub(super) fn lookup<'a>(&'a self, bytes: &'a [u8], keys: &[&str]) -> Option<&'a Value> {
        let (node, source, rest) = self.at(bytes, keys)?;
        node.lookup(source, rest)
    }

    /// The string entries of the object at `keys` (the first a top-level key).
    pub(super) fn strings_at<'a>(
        &'a self,
        bytes: &'a [u8],
        keys: &[&str],
    ) -> BTreeMap<&'a str, &'a str> {
        self.at(bytes, keys)
            .map(|(node, source, rest)| node.strings_at(source, rest))
            .unwrap_or_default()
    }

    /// The value at `keys` (the first a top-level key), to change. The objects on the way
    /// are split, not parsed, so that only the value at the end is re-encoded.
    pub(super) fn get_mut(&mut self, bytes: &[u8], keys: &[&str]) -> Option<&mut Value> {
        let (key, rest) = keys.split_first()?;
        self.complete(bytes);
        let field = self.fields.iter_mut().find(|field| field.key == *key)?;
        field.reach().get_mut(bytes, rest)
    }

    /// Sets the value at `keys` (the first a top-level key), adding missing objects on the
    /// way as [`Fields::get_mut`] splits them; false, changing nothing, when the path runs
    /// through a scalar or past an array's end.
    pub(super) fn set(&mut self, bytes: &[u8], keys: &[&str], value: Value) -> bool {
        match keys {
            [] => false,
            [key] => {
                self.insert(bytes, key, value);
                true
            }
            [key, rest @ ..] => {
                // The whole path is checked before anything on it is marked edited (a field
                // added here is an empty object, where any path can be set).
                let index = self.index_or_add(bytes, key);
                let field = &self.fields[index];
                if !field.node.can_set(field.source(bytes), rest) {
                    return false;
                }
                self.fields[index].reach().set(bytes, rest, value)
            }
        }
    }

    /// Removes every entry of the last of `keys` from the object the path ends in (the first
    /// key a top-level one), returning the value a read found there; `None`, changing
    /// nothing, when there is none. Only that object is re-encoded.
    pub(super) fn remove(&mut self, bytes: &[u8], keys: &[&str]) -> Option<Value> {
        let (key, rest) = keys.split_first()?;
        self.complete(bytes);
        if rest.is_empty() {
            // A key given twice was split into one field, with its last value.
            let index = self.fields.iter().position(|field| field.key == *key)?;
            let Field { node, own, .. } = self.fields.remove(index);
            self.removed = true;
            return Some(node.into_value(own.as_deref().unwrap_or(bytes)));
        }
        let field = self.fields.iter_mut().find(|field| field.key == *key)?;
        if !field.node.can_remove(field.source(bytes), rest) {
            return None;
        }
        field.reach().remove(bytes, rest)
    }

    /// The index of the first item of the array at `keys` (the first a top-level key) that
    /// `accept` accepts.
    pub(super) fn position(
        &self,
        bytes: &[u8],
        keys: &[&str],
        accept: &mut dyn FnMut(&Item) -> bool,
    ) -> Option<usize> {
        let (node, source, rest) = self.at(bytes, keys)?;
        node.position(source, rest, accept)
    }

    /// The index of field `key`, added as an empty object if missing.
    fn index_or_add(&mut self, bytes: &[u8], key: &str) -> usize {
        self.complete(bytes);
        match self.fields.iter().position(|field| field.key == key) {
            Some(index) => index,
            None => {
                self.fields
                    .push(Field::added(key, Value::Object(Map::new())));
                self.fields.len() - 1
            }
        }
    }

    /// Sets a field, adding it at the end if missing.
    pub(super) fn insert(&mut self, bytes: &[u8], key: &str, value: Value) {
        self.complete(bytes);
        match self.fields.iter_mut().find(|field| field.key == key) {
            Some(field) => {
                *field = Field::added(key, value);
            }
            None => self.fields.push(Field::added(key, value)),
        }
    }

    /// Keeps the items of the array in field `key` that `keep` accepts, handed as JSON text;
    /// whether any was removed. An unparsed field is edited as bytes: its items are split,
    /// never built into values, and the kept ones copied.
    pub(super) fn retain_items(
        &mut self,
        bytes: &[u8],
        key: &str,
        keep: &mut dyn FnMut(&Item) -> bool,
    ) -> bool {
        self.complete(bytes);
        let Some(field) = self.fields.iter_mut().find(|field| field.key == key) else {
            return false;
        };
        if field.node.parsed().is_some() || field.node.is_edited() {
            let edited = field.edited;
            let removed = retain_values(Some(field.reach().value_mut(bytes)), keep);
            field.edited = edited || removed;
            return removed;
        }
        let text = field.text(bytes);
        let mut kept = Vec::with_capacity(text.len());
        kept.push(b'[');
        let mut removed = false;
        let split = with_items(text, |items| {
            for item in items {
                if !keep(&item) {
                    removed = true;
                    continue;
                }
                if kept.len() > 1 {
                    kept.push(b',');
                }
                kept.extend_from_slice(item.json());
            }
        });
        if split.is_none() {
            return false;
        }
        kept.push(b']');
        if removed {
            field.node = Node::new(0..kept.len());
            field.own = Some(kept);
            field.edited = true;
        }
        removed
    }

    /// Whether any field was reached for to change (which splits them all first).
    pub(super) fn is_edited(&self) -> bool {
        self.removed || self.fields.iter().any(|field| field.edited)
    }

    /// The object encoded: what edits reached re-encoded, the rest copied from `bytes`. Only
    /// an edited object is encoded, so its fields are all split.
    pub(super) fn write(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len() + 64);
        out.push(b'{');
        for (index, field) in self.fields.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            encode(&mut out, &field.key);
            out.push(b':');
            match &field.own {
                Some(own) => out.extend_from_slice(&own[field.node.raw()]),
                None => field.node.write(&mut out, bytes),
            }
        }
        out.push(b'}');
        out
    }

    /// The whole value, the fields left as they are.
    pub(super) fn to_value(&self, bytes: &[u8]) -> Value {
        let later = self.rest.as_ref().map(|rest| rest.fields(bytes));
        let fields = self
            .fields
            .iter()
            .chain(later.into_iter().flatten())
            .map(|field| (field.key.clone(), field.node.to_value(field.source(bytes))));
        Value::Object(fields.collect())
    }

    /// The whole value, taking the parsed fields.
    pub(super) fn into_value(mut self, bytes: &[u8]) -> Value {
        self.complete(bytes);
        let fields = self.fields.into_iter().map(|field| {
            let Field { key, node, own, .. } = field;
            (key, node.into_value(own.as_deref().unwrap_or(bytes)))
        });
        Value::Object(fields.collect())
    }

    /// Whether the value at `keys` (the first a top-level key) was parsed.
    #[cfg(test)]
    pub(super) fn is_parsed_at(&self, bytes: &[u8], keys: &[&str]) -> bool {
        self.at(bytes, keys)
            .is_some_and(|(node, source, rest)| node.is_parsed_at(source, rest))
    }

    /// The field `keys` starts with: its node, the bytes the node lies in, and the keys
    /// left below it.
    fn at<'a, 'k>(
        &'a self,
        bytes: &'a [u8],
        keys: &'k [&'k str],
    ) -> Option<(&'a Node, &'a [u8], &'k [&'k str])> {
        let (key, rest) = keys.split_first()?;
        let field = self.find(bytes, key)?;
        Some((&field.node, field.source(bytes), rest))
    }

    /// The field `key`. Finding `metadata` splits nothing more; any other key splits the
    /// fields after `metadata`, so that a key given twice has its last value, as in a full
    /// parse (a second `metadata` too, once they are split).
    fn find<'a>(&'a self, bytes: &[u8], key: &str) -> Option<&'a Field> {
        let split = || self.fields.iter().find(|field| field.key == key);
        let Some(rest) = &self.rest else {
            return split();
        };
        if key == "metadata" && rest.fields.get().is_none() {
            return split();
        }
        rest.fields(bytes)
            .iter()
            .find(|field| field.key == key)
            .or_else(split)
    }
}

impl Rest {
    /// The fields after `metadata`, split on first need.
    fn fields(&self, bytes: &[u8]) -> &[Field] {
        self.fields.get_or_init(|| split_rest(bytes, self.at))
    }
}

/// Adds split entries to `fields`, a later key replacing an earlier one; `None` when a key
/// is not UTF-8.
fn add(fields: &mut Vec<Field>, bytes: &[u8], entries: Vec<super::node::Entry>) -> Option<()> {
    for (key, node) in entries {
        let key = key.text(bytes)?.to_owned();
        match fields.iter_mut().find(|field| field.key == key) {
            Some(field) => field.node = node,
            None => fields.push(Field {
                key,
                node,
                own: None,
                edited: false,
            }),
        }
    }
    Some(())
}

/// The fields after `metadata`, from `at`. Bytes that stop being one JSON object there
/// make this panic, which in a filter traps the call so the host applies the failure policy;
/// fields a filter never reaches are never checked, and pass on as they came.
fn split_rest(bytes: &[u8], at: usize) -> Vec<Field> {
    let mut fields = Vec::new();
    match split::rest(bytes, at).and_then(|entries| add(&mut fields, bytes, entries)) {
        Some(()) => fields,
        None => panic!("the object's fields after metadata are not JSON"),
    }
}

impl Field {
    fn added(key: &str, value: Value) -> Field {
        Field {
            key: key.to_owned(),
            node: Node::holding(value),
            own: None,
            edited: true,
        }
    }

    /// The field's node, to change below: marked edited, and holding its value if an edit on
    /// bytes had given it bytes of its own.
    fn reach(&mut self) -> &mut Node {
        self.edited = true;
        if let Some(own) = self.own.take() {
            let node = std::mem::replace(&mut self.node, Node::new(0..0));
            self.node = Node::holding(node.into_value(&own));
        }
        &mut self.node
    }

    /// The bytes the field's node lies in: its own after an edit on bytes, else the object's.
    fn source<'a>(&'a self, bytes: &'a [u8]) -> &'a [u8] {
        self.own.as_deref().unwrap_or(bytes)
    }

    /// The field's value as JSON text: its own bytes, else its range of the original bytes.
    fn text<'a>(&'a self, bytes: &'a [u8]) -> &'a [u8] {
        &self.source(bytes)[self.node.raw()]
    }
}

/// [`Fields::retain_items`] on a parsed value, each item handed as its JSON text.
pub(super) fn retain_values(
    value: Option<&mut Value>,
    keep: &mut dyn FnMut(&Item) -> bool,
) -> bool {
    let Some(Value::Array(items)) = value else {
        return false;
    };
    let before = items.len();
    items.retain(|item| keep(&Item::from_json(item.to_string().as_bytes())));
    items.len() != before
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const BYTES: &[u8] = br#"{"kind": "Slice", "metadata": {"name": "a", "x": 1.50},
        "endpoints": [{"nodeName": "n1"}, {"nodeName": "n2"}], "kind": "EndpointSlice"}"#;

    #[test]
    fn unedited_fields_are_copied_byte_for_byte() {
        let mut fields = Fields::split(BYTES).unwrap();
        assert_eq!(fields.lookup(BYTES, &["metadata", "x"]), Some(&json!(1.5)));
        assert_eq!(
            fields.lookup(BYTES, &["kind"]),
            Some(&json!("EndpointSlice"))
        );
        assert!(!fields.is_edited());
        let endpoints = fields.get_mut(BYTES, &["endpoints"]).unwrap();
        endpoints.as_array_mut().unwrap().pop();
        assert!(fields.is_edited());
        assert_eq!(
            String::from_utf8(fields.write(BYTES)).unwrap(),
            r#"{"kind":"EndpointSlice","metadata":{"name": "a", "x": 1.50},"endpoints":[{"nodeName":"n1"}]}"#,
            "metadata keeps its spacing and its 1.50; the repeated kind keeps its last value"
        );
    }

    #[test]
    fn added_fields_come_last_and_whole_values_agree() {
        let mut fields = Fields::split(BYTES).unwrap();
        assert!(fields.set(BYTES, &["status", "a"], json!(1)));
        fields.insert(BYTES, "kind", json!("Other"));
        let written: Value = serde_json::from_slice(&fields.write(BYTES)).unwrap();
        assert_eq!(written, fields.to_value(BYTES));
        assert_eq!(written, fields.clone().into_value(BYTES));
        assert_eq!(written["status"], json!({"a": 1}));
        assert_eq!(written["kind"], json!("Other"));
        assert_eq!(written["endpoints"][1]["nodeName"], json!("n2"));
        let parsed = |key: &str| fields.find(BYTES, key).unwrap().node.parsed().is_some();
        assert!(parsed("kind") && !parsed("endpoints"));
    }

    #[test]
    fn only_objects_split() {
        assert!(Fields::split(b"[1, 2]").is_none());
        assert!(Fields::split(b"{\"a\": }").is_none());
        assert!(Fields::split(b"{}").unwrap().write(b"{}") == b"{}");
    }
}
