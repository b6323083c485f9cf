//! What `edgegate filter test` and `bench` read from stdin: one object, or a `…List` whose
//! items are the objects, each kept as the bytes the author wrote (field order, spacing and
//! escapes as given), so the filter reads what it would read from kube-apiserver.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::filter::error::FilterError;

/// Stdin, read as the objects a filter is given.
pub(super) enum Input<'a> {
    /// One object: stdin without the whitespace around it.
    Object(&'a RawValue),
    /// A `…List`: its fields in their order, `items` among them, and its items.
    List {
        fields: Vec<(String, &'a RawValue)>,
        items: Vec<&'a RawValue>,
    },
}

impl<'a> Input<'a> {
    /// Reads `input`, refusing anything but a JSON object, and a list whose items are not an
    /// array.
    pub(super) fn read(input: &'a [u8]) -> Result<Input<'a>, FilterError> {
        let not_an_object =
            |e: serde_json::Error| FilterError::Input(format!("stdin is not a JSON object: {e}"));
        // The whole of stdin, without the whitespace around it, then its fields.
        let whole: &RawValue = serde_json::from_slice(input).map_err(not_an_object)?;
        let Fields(fields) = serde_json::from_str(whole.get()).map_err(not_an_object)?;
        let field = |name: &str| fields.iter().rev().find(|(key, _)| key == name);
        let kind =
            field("kind").and_then(|(_, kind)| serde_json::from_str::<String>(kind.get()).ok());
        let (Some(kind), Some((_, items))) = (kind.filter(|k| k.ends_with("List")), field("items"))
        else {
            return Ok(Input::Object(whole));
        };
        let items = serde_json::from_str(items.get())
            .map_err(|e| FilterError::Input(format!("the {kind}'s items are not an array: {e}")))?;
        Ok(Input::List { fields, items })
    }

    /// The objects the filter is given, in order.
    pub(super) fn objects(&self) -> Vec<&'a RawValue> {
        match self {
            Input::Object(object) => vec![object],
            Input::List { items, .. } => items.clone(),
        }
    }
}

/// A JSON object's fields in their order, each value as written.
struct Fields<'a>(Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FieldsVisitor)
    }
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
        let mut fields = Vec::new();
        while let Some(field) = map.next_entry()? {
            fields.push(field);
        }
        Ok(Fields(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::Input;

    #[test]
    fn objects_are_the_bytes_written() {
        let object = " {\"metadata\": {\"name\":\"p\"},  \"kind\": \"Pod\"}\n";
        let Input::Object(read) = Input::read(object.as_bytes()).unwrap() else {
            panic!("one object")
        };
        assert_eq!(read.get(), object.trim());

        let list =
            r#"{"metadata":{}, "items": [ {"b":1,"a":2}, {"z" : "\u0041"} ], "kind":"PodList"}"#;
        let input = Input::read(list.as_bytes()).unwrap();
        let objects: Vec<&str> = input.objects().iter().map(|o| o.get()).collect();
        assert_eq!(objects, [r#"{"b":1,"a":2}"#, r#"{"z" : "\u0041"}"#]);
        let Input::List { fields, .. } = input else {
            panic!("a list")
        };
        let keys: Vec<&str> = fields.iter().map(|(key, _)| key.as_str()).collect();
        assert_eq!(keys, ["metadata", "items", "kind"]);
    }

    #[test]
    fn a_list_kind_without_items_is_one_object() {
        for text in [
            r#"{"kind": "PodList"}"#,
            r#"{"kind": 7, "items": []}"#,
            r#"{"kind": "Pod", "items": []}"#,
        ] {
            assert!(
                matches!(Input::read(text.as_bytes()), Ok(Input::Object(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn what_is_not_an_object_or_a_list_is_refused() {
        let cases = [
            ("[1, 2]", "not a JSON object"),
            ("{not json", "not a JSON object"),
            (r#"{"a": 1} {"b": 2}"#, "not a JSON object"),
            (r#"{"kind": "PodList", "items": {}}"#, "not an array"),
        ];
        for (text, wanted) in cases {
            let error = Input::read(text.as_bytes()).err().expect(text).to_string();
            assert!(error.contains(wanted), "{text}: {error}");
        }
    }
}
