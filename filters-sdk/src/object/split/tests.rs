//! The splitter against `serde_json` on text chosen to trip a word-at-a-time scan.

use serde_json::{Value, json};

use super::*;
use crate::object::node::{Entry, Node};
use crate::object::value::parse;

fn text(bytes: &[u8], raw: Range<usize>) -> &str {
    std::str::from_utf8(&bytes[raw]).unwrap()
}

/// The whole split: the head, then the rest.
fn top_level(bytes: &[u8]) -> Option<Vec<Entry>> {
    let (mut entries, at) = head(bytes)?;
    if let Some(at) = at {
        entries.extend(rest(bytes, at)?);
    }
    Some(entries)
}

/// Splits `bytes` and checks every entry (and metadata's) against the whole parse.
fn agrees(bytes: &[u8]) {
    let whole: Value = serde_json::from_slice(bytes).unwrap();
    let entries = top_level(bytes).unwrap_or_else(|| panic!("{}", text(bytes, 0..bytes.len())));
    let mut rebuilt = serde_json::Map::new();
    for (key, node) in &entries {
        let key = key.text(bytes).unwrap().to_owned();
        rebuilt.insert(key, parse(&bytes[node.raw()]));
    }
    assert_eq!(
        Value::Object(rebuilt),
        whole,
        "{}",
        text(bytes, 0..bytes.len())
    );
    if let Some(metadata) = whole.get("metadata").filter(|m| m.is_object()) {
        let (_, node) = entries
            .iter()
            .rev()
            .find(|(k, _)| k.is(bytes, "metadata"))
            .unwrap();
        for (key, value) in metadata.as_object().unwrap() {
            assert_eq!(node.lookup(bytes, &[key]), Some(value), "metadata.{key}");
        }
    }
}

#[test]
fn entries_agree_with_a_whole_parse() {
    let quotes_at_every_offset: Vec<String> = (0..17)
        .map(|n| format!("{}\\\"{}\\\\", "x".repeat(n), "y".repeat(n)))
        .collect();
    let documents = [
        json!({"kind": "A", "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {}}),
        json!({"s": quotes_at_every_offset, "n": [1, -2.5e3, true, null, {"[": "]"}]}),
        json!({"metadata": {"annotations": {"last": "{\"spec\":{\"ports\":[{\"port\":443}]}}"}}}),
        json!({"k\"ey": 1, "ключ": "значение ✓", "tab\there": "\u{1}\u{1f}"}),
        json!({"metadata": {}, "e": [], "o": {}, "deep": [[[{"a": [{}]}]]]}),
    ];
    for document in &documents {
        agrees(document.to_string().as_bytes());
        agrees(serde_json::to_string_pretty(document).unwrap().as_bytes());
    }
    agrees(br#" { "a" : "\\" , "metadata"  :  { "name" : "n" }  , "b" : 1 } "#);
}

#[test]
fn the_head_stops_after_metadata_and_the_rest_is_read_only_when_asked() {
    let bytes = br#"{"kind":"A", "metadata":{"name":"n"} , "spec": [}"#;
    let (entries, at) = head::<Node>(bytes).unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(&bytes[at.unwrap()..], br#" , "spec": [}"#);
    assert!(
        rest::<Node>(bytes, at.unwrap()).is_none(),
        "what follows is not JSON"
    );
    let (entries, at) = head::<Node>(br#" {"kind":"A"} "#).unwrap();
    assert_eq!(
        (entries.len(), at),
        (1, None),
        "no metadata: the whole object"
    );
    let bytes = br#"{"metadata":{} , "b":1,"metadata":2 }"#;
    let (_, at) = head::<Node>(bytes).unwrap();
    let later: Vec<Entry> = rest(bytes, at.unwrap()).unwrap();
    assert_eq!(later.len(), 2);
    assert_eq!(text(bytes, later[1].1.raw()), "2");
}

#[test]
fn top_level_objects_are_split_in_the_same_scan() {
    let bytes = br#"{"kind":"A","metadata":{"name":"n"},"spec":{"type":"B"},"items":[{}]}"#;
    let entries = top_level(bytes).unwrap();
    let (_, metadata) = &entries[1];
    assert_eq!(text(bytes, metadata.raw()), r#"{"name":"n"}"#);
    assert!(metadata.is_split(), "before any read");
    assert!(entries[2].1.is_split(), "spec too");
    assert!(
        !entries[0].1.is_split() && !entries[3].1.is_split(),
        "not strings or arrays"
    );
    let array = br#"{"metadata": [1, 2], "kind": "A"}"#;
    let entries = top_level(array).unwrap();
    assert_eq!(text(array, entries[0].1.raw()), "[1, 2]", "left whole");
}

#[test]
fn text_that_is_not_one_object_does_not_split() {
    for bad in [
        &b"[1, 2]"[..],
        b"{\"a\": }",
        b"{\"a\": 1} x",
        b"{\"a\" 1}",
        b"{\"a\": 1,}",
        b"{\"a\": \"open",
        b"{\"a\": [1, 2}",
        b"{\"a\": {\"b\": 1}",
        b"",
        b"{\"metadata\": {}, \"a\": }",
        b"{\"metadata\": {}} x",
        b"{\"metadata\": {\"a\": 1}",
    ] {
        assert!(top_level(bad).is_none(), "{}", String::from_utf8_lossy(bad));
    }
    assert!(entries::<Node>(b"[1]", 0..3).is_none());
    assert!(
        entries::<Node>(b"{\"a\": 1}", 0..4).is_none(),
        "never reads past the range"
    );
}

#[test]
fn items_are_ranges_of_the_array_and_objects_are_split_on_the_way() {
    let array = br#" [ {"a": "]", "b" : {"c": 1}} , "x,y" , 3 , [1, [2]], {} ] "#;
    let mut fields = Vec::new();
    let split = all_items(array, &mut fields).unwrap();
    let items: Vec<&str> = split
        .iter()
        .map(|(item, _)| text(array, item.clone()))
        .collect();
    assert_eq!(
        items,
        [
            r#"{"a": "]", "b" : {"c": 1}}"#,
            r#""x,y""#,
            "3",
            "[1, [2]]",
            "{}"
        ]
    );
    let of = |index: usize| -> Vec<(&str, &str)> {
        fields[split[index].1.clone()]
            .iter()
            .map(|(key, value)| (key.text(array).unwrap(), text(array, value.clone())))
            .collect()
    };
    assert_eq!(of(0), [("a", r#""]""#), ("b", r#"{"c": 1}"#)]);
    assert!((1..5).all(|index| of(index).is_empty()));
    assert_eq!(all_items(b"[]", &mut fields).unwrap(), []);
    for bad in [&b"{}"[..], b"[1 2]", br#"[{"a" 1}]"#, br#"[{"a": 1]"#] {
        assert!(all_items(bad, &mut fields).is_none(), "{bad:?}");
    }
}

/// Every item of the array `text` and the range of `fields` holding its fields.
fn all_items(
    text: &[u8],
    fields: &mut Vec<FieldRange>,
) -> Option<Vec<(Range<usize>, Range<usize>)>> {
    let mut items = Vec::new();
    items_and_fields(text, fields, |item, own, _| {
        items.push((item, own));
        ControlFlow::Continue(())
    })?;
    Some(items)
}

#[test]
fn the_item_scan_reads_nothing_after_the_item_it_stops_at() {
    let array = br#"[{"name": "a"}, {"name": "https"}, {"name": ]"#;
    let mut seen = Vec::new();
    let read = items_and_fields(array, &mut Vec::new(), |item, own, fields| {
        seen.push((text(array, item), own.len(), fields.len()));
        if seen.len() == 2 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    assert_eq!(read, Some(()));
    assert_eq!(
        seen,
        [(r#"{"name": "a"}"#, 1, 1), (r#"{"name": "https"}"#, 1, 2)]
    );
    // Read on, the scan finds the array broken.
    let read_on = items_and_fields(array, &mut Vec::new(), |_, _, _| ControlFlow::Continue(()));
    assert_eq!(read_on, None);
}

#[test]
fn an_object_is_split_into_fields_within_its_range() {
    let mut fields = Vec::new();
    assert!(object_fields(br#" {"a": 1} "#, 0..10, &mut fields).is_some());
    assert_eq!(fields.len(), 1);
    assert!(object_fields(br#"{"a": 1} x"#, 0..10, &mut fields).is_none());
    assert!(
        object_fields(br#"{"a": 1}"#, 0..5, &mut fields).is_none(),
        "never past the range"
    );
}
