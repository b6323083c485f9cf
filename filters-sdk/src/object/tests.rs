//! The object's accessors on values and on split bytes.

use serde_json::json;

use super::*;

mod edits;

fn service() -> Object {
    Object::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7",
                     "labels": {"app": "web"}},
        "spec": {"clusterIP": "10.0.0.1", "ports": [{"name": "https", "port": 443}]}
    }))
    .unwrap()
}

#[test]
fn identity_and_metadata_maps() {
    let mut object = service();
    assert_eq!(object.kind(), Some("Service"));
    assert_eq!(object.name(), Some("web"));
    assert_eq!(object.namespace(), Some("default"));
    assert_eq!(object.resource_version(), Some("7"));
    assert_eq!(object.label("app"), Some("web"));
    assert_eq!(object.annotation("x"), None);
    object.set_annotation("x", "1");
    object.set_label("tier", "front");
    assert_eq!(object.annotations().get("x"), Some(&"1"));
    assert_eq!(object.labels().len(), 2);
    assert_eq!(object.remove_label("app").as_deref(), Some("web"));
    assert_eq!(object.label("app"), None);
    object.set_name("api");
    object.set_namespace("prod");
    object.set_kind("Thing");
    assert_eq!(
        (object.name(), object.namespace(), object.kind()),
        (Some("api"), Some("prod"), Some("Thing"))
    );
}

#[test]
fn paths_reach_into_objects_and_arrays() {
    let mut object = service();
    assert_eq!(object.spec("clusterIP"), Some(&json!("10.0.0.1")));
    assert_eq!(object.spec("ports.0.port"), Some(&json!(443)));
    assert_eq!(object.spec("ports.1.port"), None);
    assert_eq!(object.spec("clusterIP.x"), None);
    *object.spec_mut("ports.0.port").unwrap() = json!(10268);
    assert_eq!(object.get("spec.ports.0.port"), Some(&json!(10268)));
    assert!(object.set_status("loadBalancer.ingress", json!([])));
    assert_eq!(object.status("loadBalancer.ingress"), Some(&json!([])));
    assert!(object.set_spec("ports.0.name", json!("h")));
    assert_eq!(object.spec("ports.0.name"), Some(&json!("h")));
    assert!(!object.set_spec("ports.5.name", json!("h")));
    assert!(!object.set_spec("clusterIP.inner", json!(1)));
}

#[test]
fn an_object_knows_whether_it_was_edited() {
    fn ignore<T>(_: T) {}
    let bytes = br#"{"metadata":{"name":"a","labels":{"x":"1"}},"spec":{"type":"ClusterIP"}}"#;
    let read = |edit: &dyn Fn(&mut Object)| {
        let mut object = Object::from_slice(bytes).unwrap();
        edit(&mut object);
        (object.is_edited(), object.edits())
    };
    // What reads, or finds the value already there, or removes nothing, edits nothing.
    for unedited in [
        read(&|o| ignore(o.spec("type").cloned())),
        read(&|o| ignore(o.update("spec.type", json!("ClusterIP")))),
        read(&|o| ignore(o.remove_label("missing"))),
        read(&|o| ignore(o.set("spec.type.inner", json!(1)))),
        read(&|o| ignore(o.value().clone())),
    ] {
        assert_eq!(unedited, (false, None));
    }
    let (edited, edits) = read(&|o| o.set_label("x", "2"));
    assert!(edited);
    assert_eq!(
        edits.unwrap(),
        br#"{"metadata":{"name":"a","labels":{"x":"2"}},"spec":{"type":"ClusterIP"}}"#
    );
    // A part handed out to change counts as an edit; unchanged, it still encodes as it came.
    assert_eq!(read(&|o| ignore(o.get_mut("spec.type"))), (true, None));
    // The whole value is encoded whole (its keys sorted): the same object, other bytes.
    let (edited, edits) = read(&|o| ignore(o.value_mut()));
    let whole: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    assert!(edited);
    assert_eq!(
        serde_json::from_slice::<Value>(&edits.unwrap()).unwrap(),
        whole
    );
    assert_eq!(
        read(&|o| ignore(o.retain_items("spec", |_| true))),
        (false, None)
    );
}

#[test]
fn update_reports_only_real_changes() {
    let mut object = service();
    assert!(object.is_named("default", "web"));
    assert!(!object.is_named("kube-system", "web"));
    assert!(!object.update("spec.clusterIP", json!("10.0.0.1")));
    assert!(object.update("spec.clusterIP", json!("169.254.2.1")));
    assert_eq!(object.spec("clusterIP"), Some(&json!("169.254.2.1")));
    assert!(object.update("spec.clusterIPs", json!(["169.254.2.1"])));
    assert!(!object.update("spec.clusterIP.inner", json!(1)), "no path");
}

#[test]
fn only_json_objects_are_objects() {
    assert!(matches!(
        Object::from_slice(b"[1]"),
        Err(ObjectError::NotAnObject)
    ));
    assert!(matches!(
        Object::from_slice(b"nope"),
        Err(ObjectError::Parse(_))
    ));
    // Bytes that open an object are read as one; where they stop being one, a read traps.
    let broken = Object::from_slice(b" {").unwrap();
    assert!(std::panic::catch_unwind(move || broken.name().map(str::to_owned)).is_err());
    let object = Object::from_slice(br#"{"kind":"Pod"}"#).unwrap();
    assert_eq!(Object::from_slice(&object.to_vec()).unwrap(), object);
}

#[test]
fn the_split_bytes_answer_until_the_value_is_needed() {
    let bytes = br#"{"kind": "Service", "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7", "labels": {"app": "web"}, "annotations": {"a": "1"}}, "spec": {"type": "ClusterIP"}}"#;
    let mut object = Object::from_slice(bytes).unwrap();
    assert_eq!(
        (object.kind(), object.name(), object.namespace()),
        (Some("Service"), Some("web"), Some("default"))
    );
    assert_eq!(object.resource_version(), Some("7"));
    assert_eq!(object.label("app"), Some("web"));
    assert_eq!(object.annotations(), BTreeMap::from([("a", "1")]));
    assert!(
        object.value.get().is_none(),
        "identity and maps come from the split bytes"
    );
    assert_eq!(object.to_vec(), bytes, "unchanged, the original bytes");

    assert_eq!(object.spec("type"), Some(&Value::from("ClusterIP")));
    object.set_label("app", "api");
    object.set_name("api");
    assert_eq!(
        (object.name(), object.label("app")),
        (Some("api"), Some("api"))
    );
    let written: Value = serde_json::from_slice(&object.to_vec()).unwrap();
    assert_eq!(written["metadata"]["labels"]["app"], "api");
}

#[test]
fn the_fields_after_metadata_are_split_only_when_reached() {
    let bytes =
        br#"{"kind": "Service", "metadata": {"name": "web", "labels": {"a": "b"}}, "spec": [}"#;
    let object = Object::from_slice(bytes).unwrap();
    assert_eq!(object.name(), Some("web"));
    assert_eq!(object.label("a"), Some("b"));
    assert_eq!(object.to_vec(), bytes, "kept as it came, unread");
    let copy = object.clone();
    let reach = std::panic::catch_unwind(move || copy.spec("type").cloned());
    assert!(reach.is_err(), "text that is not JSON traps once reached");
    let copy = object.clone();
    let reach = std::panic::catch_unwind(move || copy.kind().map(str::to_owned));
    assert!(
        reach.is_err(),
        "a field before metadata may be given again after it"
    );

    let twice = br#"{"kind": "A", "metadata": {"name": "first"}, "kind": "B", "metadata": {"name": "last"}}"#;
    let object = Object::from_slice(twice).unwrap();
    assert_eq!(
        object.name(),
        Some("first"),
        "metadata alone reads the head"
    );
    assert_eq!(
        object.kind(),
        Some("B"),
        "the last value, as in a full parse"
    );
    assert_eq!(
        object.name(),
        Some("last"),
        "and once the rest is split, for metadata too"
    );
    assert!(Object::from_slice(br#"["metadata"]"#).is_err());
}

#[test]
fn names_and_labels_are_read_from_the_bytes_up_to_them() {
    // Everything after the labels is broken: reading up to them never reaches it.
    let bytes =
        br#"{"kind": "EndpointSlice", "metadata": {"name": "web-x1", "namespace": "default",
        "labels": {"kubernetes.io/service-name": "web", "odd": 7},
        "annotations": {"a": "1"}, "managedFields": [}, "endpoints": ]"#;
    let object = Object::from_slice(bytes).unwrap();
    assert!(object.is_named("default", "web-x1"));
    assert!(!object.is_named("default", "web"));
    assert_eq!(object.label("kubernetes.io/service-name"), Some("web"));
    assert_eq!(object.label("absent"), None, "read to the labels' end");
    assert_eq!(object.annotation("a"), Some("1"));
    assert!(
        object.fields.get().is_none() && object.value.get().is_none(),
        "nothing was split or parsed"
    );
    // What is not a plain string is looked up through the split, which reaches the break.
    let copy = object.clone();
    assert!(std::panic::catch_unwind(move || copy.label("odd").map(str::to_owned)).is_err());
    let copy = object.clone();
    let past = std::panic::catch_unwind(move || copy.resource_version().map(str::to_owned));
    assert!(
        past.is_err(),
        "a missing key is known missing only at its object's end"
    );

    // A string that needs unescaping is looked up, and answers as a whole parse does.
    let escaped =
        Object::from_slice(br#"{"metadata": {"name": "a\u0041", "labels": {"k": "\"q\""}}}"#)
            .unwrap();
    assert_eq!(escaped.name(), Some("aA"));
    assert_eq!(escaped.label("k"), Some(r#""q""#));
    let control = Object::from_slice(b"{\"metadata\": {\"name\": \"a\tb\"}}").unwrap();
    assert!(std::panic::catch_unwind(move || control.name().map(str::to_owned)).is_err());

    // A key given twice: the first until the fields are split, then the last.
    let twice =
        Object::from_slice(br#"{"metadata": {"name": "first", "name": "last"}, "kind": "A"}"#)
            .unwrap();
    assert_eq!(twice.name(), Some("first"));
    assert_eq!(twice.kind(), Some("A"));
    assert_eq!(twice.name(), Some("last"));
}

#[test]
fn a_path_parses_only_the_value_at_its_end() {
    let bytes = br#"{"metadata": {"name": "web", "annotations": {"big": "{\"a\": 1}", "x": "1"}},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 443}]}}"#;
    let mut object = Object::from_slice(bytes).unwrap();
    assert_eq!(object.get("metadata.annotations.x"), Some(&json!("1")));
    assert_eq!(object.spec("type"), Some(&json!("LoadBalancer")));
    assert_eq!(object.name(), Some("web"));
    let fields = object.fields.get().unwrap();
    assert!(fields.is_parsed_at(&object.raw, &["metadata", "annotations", "x"]));
    assert!(fields.is_parsed_at(&object.raw, &["spec", "type"]));
    for untouched in [
        &["metadata", "annotations", "big"][..],
        &["metadata", "annotations"],
        &["spec", "ports"],
        &["spec"],
    ] {
        assert!(
            !fields.is_parsed_at(&object.raw, untouched),
            "{untouched:?} was parsed"
        );
    }
    assert_eq!(object.annotations().len(), 2);
    assert_eq!(object.to_vec(), bytes, "unchanged, the original bytes");
    object.set_annotation("x", "2");
    assert_eq!(object.annotation("x"), Some("2"), "an edit answers at once");
    assert_eq!(object.annotation("big"), Some(r#"{"a": 1}"#));
    let written: Value = serde_json::from_slice(&object.to_vec()).unwrap();
    assert_eq!(written["spec"]["ports"][0]["port"], 443);
}

#[test]
fn unusual_metadata_is_read_as_it_is() {
    // A label that is not a string is skipped by the string maps; the object is still read.
    let object =
        Object::from_slice(br#"{"metadata":{"name":"x","labels":{"n":1,"s":"v"}}}"#).unwrap();
    assert_eq!(object.name(), Some("x"));
    assert_eq!(object.label("n"), None);
    assert_eq!(object.labels(), BTreeMap::from([("s", "v")]));
    assert!(matches!(
        Object::from_slice(b" [null, null, null]"),
        Err(ObjectError::NotAnObject)
    ));
}

#[test]
fn a_path_edit_re_encodes_only_the_value_it_sets() {
    let bytes = br#"{"kind": "Service", "metadata": {"name": "web", "namespace": "default", "annotations": {"z": "1", "a": "2"}}, "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.1", "ports": [ {"port": 443, "weight": 1.50} ]}}"#;
    let mut object = Object::from_slice(bytes).unwrap();
    assert_eq!(object.spec("type"), Some(&Value::from("ClusterIP")));
    assert_eq!(
        object.to_vec(),
        bytes,
        "read, not edited: the original bytes"
    );
    assert!(object.update("spec.clusterIP", Value::from("169.254.2.1")));
    assert!(
        object.value.get().is_none(),
        "a path edit builds no whole value"
    );
    let fields = object.fields.get().unwrap();
    assert!(
        !fields.is_parsed_at(&object.raw, &["spec"]),
        "spec was split, not parsed"
    );
    assert_eq!(
        String::from_utf8(object.to_vec()).unwrap(),
        r#"{"kind":"Service","metadata":{"name": "web", "namespace": "default", "annotations": {"z": "1", "a": "2"}},"spec":{"type":"ClusterIP","clusterIP":"169.254.2.1","ports":[ {"port": 443, "weight": 1.50} ]}}"#,
        "spec keeps its order, and its other entries their bytes"
    );
    *object.get_mut("spec.ports.0.port").unwrap() = Value::from(10268);
    assert!(object.set("spec.topology.zone", Value::from("a")));
    assert!(
        !object.set("spec.type.x", Value::from(1)),
        "through a scalar"
    );
    assert!(
        !object.set("spec.ports.1.port", Value::from(1)),
        "past an array's end"
    );
    assert_eq!(
        String::from_utf8(object.to_vec()).unwrap(),
        r#"{"kind":"Service","metadata":{"name": "web", "namespace": "default", "annotations": {"z": "1", "a": "2"}},"spec":{"type":"ClusterIP","clusterIP":"169.254.2.1","ports":[{"port":10268,"weight":1.50}],"topology":{"zone":"a"}}}"#,
        "arrays on the way are split too, so only the port is re-encoded; missing objects are added last"
    );
    assert_eq!(object.get("spec.topology.zone"), Some(&Value::from("a")));
    assert_eq!(object.spec("ports.0.port"), Some(&Value::from(10268)));
    assert_eq!(
        object.get("spec").unwrap()["clusterIP"],
        "169.254.2.1",
        "the whole value of an edited object is built from its entries"
    );

    // An edit of metadata by path answers the accessors from then on, not the stale bytes.
    object.set_annotation("z", "9");
    object.set("status.ready", Value::Bool(true));
    assert_eq!(object.annotation("z"), Some("9"));
    assert_eq!(object.name(), Some("web"));
    let written = Object::from_slice(&object.to_vec()).unwrap();
    assert_eq!(written, object);
    assert_eq!(written.annotation("z"), Some("9"));
    assert_eq!(written.get("status.ready"), Some(&Value::Bool(true)));

    // The whole value agrees with the fields, and edits on it win from then on.
    object.value_mut()["spec"]["type"] = Value::from("NodePort");
    assert_eq!(object.spec("type"), Some(&Value::from("NodePort")));
    assert_eq!(object.annotation("z"), Some("9"));
    assert!(object.fields.get().is_none());
}

#[test]
fn items_are_retained_as_text_or_as_values_alike() {
    let bytes = br#"{"kind": "List", "items": [1, {"a": [2]}, "three"], "other": [4]}"#;
    let strings = |object: &mut Object| {
        let mut seen = Vec::new();
        let removed = object.retain_items("items", |item| {
            let text = item.text().unwrap();
            seen.push(text.replace(' ', ""));
            !text.starts_with('{')
        });
        (removed, seen)
    };
    let mut as_text = Object::from_slice(bytes).unwrap();
    let mut as_value = Object::from_value(serde_json::from_slice(bytes).unwrap()).unwrap();
    let (text_removed, text_seen) = strings(&mut as_text);
    let (value_removed, value_seen) = strings(&mut as_value);
    assert!(text_removed && value_removed);
    assert_eq!(text_seen, value_seen);
    assert_eq!(
        String::from_utf8(as_text.to_vec()).unwrap(),
        r#"{"kind":"List","items":[1,"three"],"other":[4]}"#
    );
    assert_eq!(as_text, as_value);
    assert_eq!(as_text.get("items.1"), Some(&Value::from("three")));
    assert!(!as_text.retain_items("missing", |_| false));
    assert!(!as_text.retain_items("kind", |_| false));
}

#[test]
fn positions_are_found_in_bytes_in_values_and_after_edits_alike() {
    let bytes = br#"{"metadata": {"name": "a"}, "spec": {"ports": [{"name": "dns", "port": 53}, {"port": 1}, {"name": "https", "port": 443}], "type": "ClusterIP"}}"#;
    let named = |object: &Object, name: &str| {
        object.position("spec.ports", |port| {
            port.string("name").as_deref() == Some(name)
        })
    };
    let mut object = Object::from_slice(bytes).unwrap();
    let as_value = Object::from_value(serde_json::from_slice(bytes).unwrap()).unwrap();
    for object in [&object, &as_value] {
        assert_eq!(named(object, "https"), Some(2));
        assert_eq!(named(object, "dns"), Some(0));
        assert_eq!(named(object, "http"), None);
        assert_eq!(object.position("spec.type", |_| true), None, "not an array");
        assert_eq!(object.position("spec.missing", |_| true), None);
    }
    assert!(
        !object
            .fields
            .get()
            .unwrap()
            .is_parsed_at(&object.raw, &["spec", "ports"])
    );
    assert!(object.set("spec.ports.1.name", Value::from("https")));
    assert_eq!(
        named(&object, "https"),
        Some(1),
        "an edited array is read as it is now"
    );
}

#[test]
fn an_object_is_moved_without_a_call_to_memmove() {
    // x86-64 moves up to 128 bytes inline; past that a batch of objects calls `memmove`
    // for each (masterservice's keep path was 7 % slower at 136 bytes).
    assert!(std::mem::size_of::<Object>() <= 128);
}
