//! Edits by path and by key: what a failed set, a removal and a nested edit leave.

use serde_json::json;

use super::*;

#[test]
fn a_set_that_fails_changes_nothing() {
    let text = r#"{"kind": "Service", "metadata": {"name": "web"}, "spec": {"type": "ClusterIP", "ports": [ {"port": 443} ], "z": 1, "a": 2}}"#;
    let paths = [
        "kind.x",
        "spec.type.x",
        "spec.ports.1.port",
        "spec.ports.x",
        "spec.ports.0.port.x",
        "spec.type.x.y",
    ];
    // On the bytes, once `spec` was parsed, and once the whole object was (then written whole).
    let reads: [fn(&Object); 3] = [
        |_| {},
        |o| assert!(o.get("spec").is_some()),
        |o| assert!(o.value().is_object()),
    ];
    for (read, path) in reads.iter().flat_map(|read| paths.map(|path| (read, path))) {
        let mut object = Object::from_slice(text.as_bytes()).unwrap();
        read(&object);
        let bytes = object.to_vec();
        assert!(!object.set(path, Value::from(1)), "{path}");
        assert_eq!(
            String::from_utf8(object.to_vec()).unwrap(),
            String::from_utf8(bytes).unwrap(),
            "{path}"
        );
    }
    let object = Object::from_slice(text.as_bytes()).unwrap();
    assert_eq!(
        object.to_vec(),
        text.as_bytes(),
        "unread, nothing is re-encoded"
    );
}

#[test]
fn metadata_edits_copy_the_rest_of_metadata_as_it_came() {
    let bytes = br#"{"kind": "Service", "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}, "annotations": {"applied": "{\"spec\": {}}\n", "z": "1"}, "managedFields": [ {"manager": "kubectl", "time": "2026-01-01T00:00:00Z"} ]}, "spec": {"type": "ClusterIP"}}"#;
    let mut object = Object::from_slice(bytes).unwrap();
    assert_eq!(object.remove_label("missing"), None);
    assert_eq!(object.remove_annotation("missing"), None);
    assert_eq!(
        object.to_vec(),
        bytes,
        "nothing removed, nothing re-encoded"
    );
    object.set_label("tier", "front");
    object.set_annotation("z", "2");
    assert_eq!(
        object.remove_annotation("applied").as_deref(),
        Some("{\"spec\": {}}\n")
    );
    assert!(object.value.get().is_none(), "no whole value was built");
    assert_eq!(
        String::from_utf8(object.to_vec()).unwrap(),
        r#"{"kind":"Service","metadata":{"name":"web","namespace":"default","labels":{"app":"web","tier":"front"},"annotations":{"z":"2"},"managedFields":[ {"manager": "kubectl", "time": "2026-01-01T00:00:00Z"} ]},"spec":{"type": "ClusterIP"}}"#,
        "metadata keeps its order, managedFields and spec their bytes"
    );
    object.set_name("api");
    assert_eq!(
        (object.name(), object.label("tier")),
        (Some("api"), Some("front"))
    );
    assert_eq!(object.annotations(), BTreeMap::from([("z", "2")]));

    // Something that is not an object on the way is made one, as on a parsed value.
    for text in [
        r#"{"metadata": {"name": "a", "labels": null}}"#,
        r#"{"metadata": "a"}"#,
        r#"{"kind": "Pod"}"#,
    ] {
        let mut object = Object::from_slice(text.as_bytes()).unwrap();
        object.set_label("app", "web");
        assert_eq!(object.label("app"), Some("web"), "{text}");
        let written = Object::from_slice(&object.to_vec()).unwrap();
        assert_eq!(written.label("app"), Some("web"), "{text}");
    }
}

#[test]
fn a_removal_takes_every_entry_of_its_key_and_nothing_else() {
    let text = r#"{"metadata": {"name": "a"}, "spec": {"t\u0079pe": "A", "ports": [{"name": "x", "port": 1}], "type": "B", "z": 1}, "status": {}}"#;
    let reads: [fn(&Object); 3] = [
        |_| {},
        |o| assert!(o.get("spec").is_some()),
        |o| assert!(o.value().is_object()),
    ];
    for read in reads {
        let mut object = Object::from_slice(text.as_bytes()).unwrap();
        read(&object);
        let before = object.to_vec();
        for path in [
            "spec.ports.0",
            "spec.ports.x",
            "spec.z.x",
            "spec.missing",
            "none.x",
        ] {
            assert_eq!(object.remove(path), None, "{path}");
        }
        assert_eq!(
            object.to_vec(),
            before,
            "nothing removed, nothing re-encoded"
        );
        assert_eq!(
            object.remove("spec.type"),
            Some(json!("B")),
            "the last entry's value"
        );
        assert_eq!(object.spec("type"), None, "the escaped entry went too");
        assert_eq!(object.remove("spec.ports.0.name"), Some(json!("x")));
        assert_eq!(object.remove("status"), Some(json!({})));
        let written = object.to_vec();
        let parsed: Value = serde_json::from_slice(&written).unwrap();
        assert_eq!(
            parsed,
            json!({"metadata": {"name": "a"}, "spec": {"ports": [{"port": 1}], "z": 1}})
        );
        assert_eq!(&parsed, object.value());
    }
}

#[test]
fn a_nested_edit_writes_escaped_and_repeated_keys_as_a_parse_reads_them() {
    let bytes =
        br#"{"metadata": {"name": "a"}, "spec": {"t\u0079pe": "A", "x": {"y": 1}, "type": "B"}}"#;
    let mut object = Object::from_slice(bytes).unwrap();
    assert_eq!(
        object.spec("type"),
        Some(&Value::from("B")),
        "the last of the keys"
    );
    assert!(object.update("spec.type", Value::from("C")));
    assert!(object.set("spec.x.z", Value::from(2)));
    let written = object.to_vec();
    let parsed: Value = serde_json::from_slice(&written).unwrap();
    assert_eq!(parsed["spec"], json!({"type": "C", "x": {"y": 1, "z": 2}}));
    assert_eq!(&parsed, object.value());
    assert_eq!(Object::from_slice(&written).unwrap(), object);
}
