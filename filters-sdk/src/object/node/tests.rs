//! Nodes against whole parses.

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
    for (keys, parsed) in [
        (&["big"][..], false),
        (&["labels"], false),
        (&["labels", "a"], true),
        (&["ports"], false),
        (&["ports", "0"], false),
        (&["ports", "0", "port"], true),
    ] {
        assert_eq!(node.is_parsed_at(BYTES, keys), parsed, "{keys:?}");
    }
    assert_eq!(node.lookup(BYTES, &["ports", "1"]), None);
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
