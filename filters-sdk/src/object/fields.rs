//! An object's top-level fields (`metadata`, `spec`, `endpoints`, …), each kept as a range
//! of the original bytes until a filter reads or edits it. Reading a field parses that field
//! alone; encoding re-encodes only the fields a filter reached for to change and copies the
//! others byte for byte, so pruning a slice's `endpoints` never touches its `metadata`.

use std::cell::OnceCell;
use std::fmt;
use std::ops::Range;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The top-level fields of one JSON object, in their original order.
#[derive(Clone, Debug)]
pub(super) struct Fields {
    fields: Vec<Field>,
}

/// One top-level field.
#[derive(Clone, Debug)]
struct Field {
    key: String,
    /// Where the value lies in the original bytes; `None` for a field a filter added.
    raw: Option<Range<usize>>,
    /// The value's bytes after an edit made on bytes ([`Fields::retain_items`]).
    own: Option<Vec<u8>>,
    /// The value, parsed on first need.
    value: OnceCell<Value>,
    /// Whether a filter reached for the value to change it; only such fields are re-encoded.
    edited: bool,
}

impl Fields {
    /// Splits the bytes of one JSON object into its fields. A key given twice keeps its last
    /// value, as a full parse would.
    pub(super) fn split(bytes: &[u8]) -> Result<Fields, serde_json::Error> {
        let TopLevel(entries) = serde_json::from_slice(bytes)?;
        let start = bytes.as_ptr().addr();
        let mut fields: Vec<Field> = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            let offset = value.get().as_ptr().addr() - start;
            let raw = Some(offset..offset + value.get().len());
            match fields.iter_mut().find(|field| field.key == key) {
                Some(field) => field.raw = raw,
                None => fields.push(Field {
                    key,
                    raw,
                    own: None,
                    value: OnceCell::new(),
                    edited: false,
                }),
            }
        }
        Ok(Fields { fields })
    }

    /// A field's value, parsed from `bytes` (the bytes split) if it was not yet.
    pub(super) fn get(&self, bytes: &[u8], key: &str) -> Option<&Value> {
        let field = self.fields.iter().find(|field| field.key == key)?;
        Some(field.value.get_or_init(|| parse(field.text(bytes))))
    }

    /// A field's value if it was parsed, added or edited: then it, not the bytes the head was
    /// read from, answers.
    pub(super) fn parsed(&self, key: &str) -> Option<&Value> {
        let field = self.fields.iter().find(|field| field.key == key)?;
        match &field.own {
            Some(own) => Some(field.value.get_or_init(|| parse(own))),
            None => field.value.get(),
        }
    }

    /// A field's value, to change: the field is re-encoded from now on.
    pub(super) fn get_mut(&mut self, bytes: &[u8], key: &str) -> Option<&mut Value> {
        let field = self.fields.iter_mut().find(|field| field.key == key)?;
        Some(field.edit(bytes))
    }

    /// A field's value to change, added as an empty object if missing.
    pub(super) fn entry(&mut self, bytes: &[u8], key: &str) -> &mut Value {
        let index = match self.fields.iter().position(|field| field.key == key) {
            Some(index) => index,
            None => {
                self.fields
                    .push(Field::added(key, Value::Object(Map::new())));
                self.fields.len() - 1
            }
        };
        self.fields[index].edit(bytes)
    }

    /// Sets a field, adding it at the end if missing.
    pub(super) fn insert(&mut self, key: &str, value: Value) {
        match self.fields.iter_mut().find(|field| field.key == key) {
            Some(field) => {
                field.value = OnceCell::from(value);
                field.edited = true;
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
        keep: &mut dyn FnMut(&str) -> bool,
    ) -> bool {
        let Some(field) = self.fields.iter_mut().find(|field| field.key == key) else {
            return false;
        };
        if field.value.get().is_some() {
            let removed = retain_values(field.value.get_mut(), keep);
            field.edited |= removed;
            return removed;
        }
        let text = field.text(bytes);
        let Ok(items) = serde_json::from_slice::<Vec<&RawValue>>(text) else {
            return false;
        };
        let mut kept = Vec::with_capacity(text.len());
        kept.push(b'[');
        let mut removed = false;
        for item in items {
            if !keep(item.get()) {
                removed = true;
                continue;
            }
            if kept.len() > 1 {
                kept.push(b',');
            }
            kept.extend_from_slice(item.get().as_bytes());
        }
        kept.push(b']');
        if removed {
            field.own = Some(kept);
            field.edited = true;
        }
        removed
    }

    /// Whether any field was reached for to change.
    pub(super) fn is_edited(&self) -> bool {
        self.fields.iter().any(|field| field.edited)
    }

    /// The object encoded: edited fields re-encoded, the others copied from `bytes`.
    pub(super) fn write(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len() + 64);
        out.push(b'{');
        for (index, field) in self.fields.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            encode(&mut out, &field.key);
            out.push(b':');
            match field.value.get() {
                Some(value) if field.edited => encode(&mut out, value),
                _ => out.extend_from_slice(field.text(bytes)),
            }
        }
        out.push(b'}');
        out
    }

    /// The whole value, the fields left as they are.
    pub(super) fn to_value(&self, bytes: &[u8]) -> Value {
        let fields = self.fields.iter().map(|field| {
            let value = match field.value.get() {
                Some(value) => value.clone(),
                None => parse(field.text(bytes)),
            };
            (field.key.clone(), value)
        });
        Value::Object(fields.collect())
    }

    /// The whole value, taking the parsed fields.
    pub(super) fn into_value(self, bytes: &[u8]) -> Value {
        let fields = self.fields.into_iter().map(|field| {
            let Field {
                key,
                raw,
                own,
                value,
                ..
            } = field;
            let value = value.into_inner();
            (key, value.unwrap_or_else(|| parse(text(&own, &raw, bytes))))
        });
        Value::Object(fields.collect())
    }
}

impl Field {
    fn added(key: &str, value: Value) -> Field {
        Field {
            key: key.to_owned(),
            raw: None,
            own: None,
            value: OnceCell::from(value),
            edited: true,
        }
    }

    fn edit(&mut self, bytes: &[u8]) -> &mut Value {
        if self.value.get().is_none() {
            self.value = OnceCell::from(parse(self.text(bytes)));
        }
        self.edited = true;
        match self.value.get_mut() {
            Some(value) => value,
            None => unreachable!("the value was just parsed"),
        }
    }
}

impl Field {
    /// The field's value as JSON text: edited bytes, else its range of the original bytes.
    fn text<'a>(&'a self, bytes: &'a [u8]) -> &'a [u8] {
        text(&self.own, &self.raw, bytes)
    }
}

/// A field's JSON text from its edited bytes or its range of the original `bytes`.
fn text<'a>(own: &'a Option<Vec<u8>>, raw: &Option<Range<usize>>, bytes: &'a [u8]) -> &'a [u8] {
    match (own, raw) {
        (Some(own), _) => own,
        (None, Some(raw)) => &bytes[raw.clone()],
        (None, None) => unreachable!("a field without bytes is added with its value"),
    }
}

/// A field's value from its JSON text. Splitting checked the bytes are JSON; the few things
/// only a full parse rejects (a lone surrogate escape in a string) make this panic, which in
/// a filter traps the call so the host applies the failure policy.
fn parse(text: &[u8]) -> Value {
    match serde_json::from_slice(text) {
        Ok(value) => value,
        Err(error) => panic!("a field of the object does not parse: {error}"),
    }
}

/// [`Fields::retain_items`] on a parsed value, each item handed as its JSON text.
pub(super) fn retain_values(value: Option<&mut Value>, keep: &mut dyn FnMut(&str) -> bool) -> bool {
    let Some(Value::Array(items)) = value else {
        return false;
    };
    let before = items.len();
    items.retain(|item| keep(&item.to_string()));
    items.len() != before
}

fn encode<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Strings and values (string keys only) always encode.
    serde_json::to_writer(out, value).expect("a JSON value encodes");
}

/// The entries of a JSON object, each value left as its raw text.
struct TopLevel<'de>(Vec<(String, &'de RawValue)>);

impl<'de> Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(TopLevelVisitor)
    }
}

struct TopLevelVisitor;

impl<'de> Visitor<'de> for TopLevelVisitor {
    type Value = TopLevel<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
            entries.push(entry);
        }
        Ok(TopLevel(entries))
    }
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
        assert_eq!(fields.get(BYTES, "metadata").unwrap()["x"], json!(1.5));
        assert_eq!(fields.get(BYTES, "kind"), Some(&json!("EndpointSlice")));
        assert!(!fields.is_edited());
        let endpoints = fields.get_mut(BYTES, "endpoints").unwrap();
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
        fields
            .entry(BYTES, "status")
            .as_object_mut()
            .unwrap()
            .insert("a".into(), json!(1));
        fields.insert("kind", json!("Other"));
        let written: Value = serde_json::from_slice(&fields.write(BYTES)).unwrap();
        assert_eq!(written, fields.to_value(BYTES));
        assert_eq!(written, fields.clone().into_value(BYTES));
        assert_eq!(written["status"], json!({"a": 1}));
        assert_eq!(written["kind"], json!("Other"));
        assert_eq!(written["endpoints"][1]["nodeName"], json!("n2"));
        assert!(fields.parsed("kind").is_some() && fields.parsed("endpoints").is_none());
    }

    #[test]
    fn only_objects_split() {
        assert!(Fields::split(b"[1, 2]").is_err());
        assert!(Fields::split(b"{\"a\": }").is_err());
        assert!(Fields::split(b"{}").unwrap().write(b"{}") == b"{}");
    }
}
