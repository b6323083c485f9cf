//! The SDK's `Object`: reads and edits of an object read from bytes, checked against the
//! same edits made to its serde_json value. The input is the edits (decoded with
//! `arbitrary`) and the object's bytes, split at the last 0xFF byte (which UTF-8 never
//! holds). Invariants, for a JSON object with no repeated key: every read (name, labels, a
//! path) answers as the value does; after an edit, reading gives what was set (`set_x` then
//! `x`); what the object writes parses to its value, and reads back as the same object.
#![no_main]

use edgegate_filter_sdk::Object;
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

/// Keys the edits pick from, so that paths meet the object's own fields.
const KEYS: [&str; 12] = [
    "metadata",
    "spec",
    "status",
    "labels",
    "annotations",
    "name",
    "namespace",
    "a",
    "b",
    "0",
    "1",
    "ports",
];

#[derive(Arbitrary, Debug)]
enum Small {
    Null,
    Bool(bool),
    Int(i32),
    Text(String),
    Empty,
    List(Vec<u8>),
}

impl Small {
    fn value(&self) -> Value {
        match self {
            Small::Null => Value::Null,
            Small::Bool(b) => Value::from(*b),
            Small::Int(n) => Value::from(*n),
            Small::Text(text) => Value::from(text.as_str()),
            Small::Empty => Value::Object(Map::new()),
            Small::List(items) => Value::from(items.clone()),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Key {
    Known(u8),
    Any(String),
}

impl Key {
    fn text(&self) -> String {
        match self {
            Key::Known(i) => KEYS[usize::from(*i) % KEYS.len()].to_owned(),
            Key::Any(text) => text.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Edit {
    SetName(String),
    SetNamespace(String),
    SetKind(String),
    SetLabel(Key, String),
    RemoveLabel(Key),
    SetAnnotation(Key, String),
    RemoveAnnotation(Key),
    Set(Vec<Key>, Small),
    Update(Vec<Key>, Small),
    Remove(Vec<Key>),
    GetMut(Vec<Key>, Small),
    SetSpec(Vec<Key>, Small),
    SetStatus(Vec<Key>, Small),
    RetainEven(Key),
    Read(Vec<Key>),
    WholeValue(Key, Small),
}

/// At most 16 keys: a path of hundreds would nest the object past the depth serde_json
/// reads back (128), which says nothing of the SDK.
fn path(keys: &[Key]) -> String {
    let keys: Vec<String> = keys.iter().map(Key::text).collect();
    let joined = keys.join(".");
    let keys: Vec<&str> = joined.split('.').take(16).collect();
    keys.join(".")
}

fn walk<'a>(value: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(value, |value, key| match value {
        Value::Object(map) => map.get(*key),
        Value::Array(items) => items.get(key.parse::<usize>().ok()?),
        _ => None,
    })
}

fn walk_mut<'a>(value: &'a mut Value, keys: &[&str]) -> Option<&'a mut Value> {
    keys.iter().try_fold(value, |value, key| match value {
        Value::Object(map) => map.get_mut(*key),
        Value::Array(items) => items.get_mut(key.parse::<usize>().ok()?),
        _ => None,
    })
}

/// The SDK's documented `set`: missing objects made on the way, never array items; false
/// through a scalar or past an array's end.
fn set(value: &mut Value, keys: &[&str], new: Value) -> bool {
    let Some((last, on_the_way)) = keys.split_last() else {
        return false;
    };
    let mut parent = value;
    for key in on_the_way {
        parent = match parent {
            Value::Object(map) => map.entry(*key).or_insert_with(|| Value::Object(Map::new())),
            Value::Array(items) => match key.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(item) => item,
                None => return false,
            },
            _ => return false,
        };
    }
    match parent {
        Value::Object(map) => {
            map.insert((*last).to_owned(), new);
            true
        }
        Value::Array(items) => match last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
            Some(item) => {
                *item = new;
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// The SDK's documented string setters: where something that is not an object lies on the
/// way, an object is put in its place.
fn set_string(value: &mut Value, keys: &[&str], text: &str) {
    if set(value, keys, text.into()) {
        return;
    }
    let Some((last, on_the_way)) = keys.split_last() else {
        return;
    };
    let mut map = as_object(value);
    for key in on_the_way {
        map = as_object(map.entry(*key).or_insert_with(|| Value::Object(Map::new())));
    }
    map.insert((*last).to_owned(), text.into());
}

fn as_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut().expect("just made an object")
}

fn remove(value: &mut Value, keys: &[&str]) -> Option<Value> {
    let (last, on_the_way) = keys.split_last()?;
    walk_mut(value, on_the_way)?.as_object_mut()?.remove(*last)
}

fn strings(value: Option<&Value>) -> std::collections::BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

fn owned(
    map: std::collections::BTreeMap<&str, &str>,
) -> std::collections::BTreeMap<String, String> {
    map.into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let (edits, bytes) = match data.iter().rposition(|&b| b == 0xFF) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&[][..], data),
    };
    let Ok(mut object) = Object::from_slice(bytes) else {
        return;
    };
    // Bytes that stop being JSON past their first brace make a read panic, by contract
    // (a filter's call traps); and where keys repeat, reads may take the first.
    let Ok(mut model @ Value::Object(_)) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    if !edgegate_fuzz::json_without_duplicate_keys(bytes) {
        return;
    }
    let Ok(edits) = Vec::<Edit>::arbitrary_take_rest(Unstructured::new(edits)) else {
        return;
    };
    for edit in edits.iter().take(16) {
        apply(&mut object, &mut model, edit);
        reads_agree(&object, &model, edit);
    }
    let written = object.to_vec();
    let parsed: Value = serde_json::from_slice(&written).unwrap_or_else(|e| {
        panic!(
            "{e}: the object writes {}",
            String::from_utf8_lossy(&written)
        )
    });
    assert_eq!(parsed, model, "what the object writes is not its value");
    assert_eq!(
        object.value(),
        &model,
        "the object's value is not the edits'"
    );
    let again = Object::from_slice(&written).expect("what it writes reads back");
    assert_eq!(again, object);
    assert_eq!(again.name(), object.name());
    assert_eq!(again.labels(), object.labels());
});

fn apply(object: &mut Object, model: &mut Value, edit: &Edit) {
    match edit {
        Edit::SetName(name) => {
            object.set_name(name);
            set_string(model, &["metadata", "name"], name);
            assert_eq!(object.name(), Some(name.as_str()), "set_name then name");
        }
        Edit::SetNamespace(namespace) => {
            object.set_namespace(namespace);
            set_string(model, &["metadata", "namespace"], namespace);
            assert_eq!(object.namespace(), Some(namespace.as_str()));
        }
        Edit::SetKind(kind) => {
            object.set_kind(kind);
            set(model, &["kind"], kind.as_str().into());
            assert_eq!(object.kind(), Some(kind.as_str()));
        }
        Edit::SetLabel(key, text) => {
            let key = key.text();
            object.set_label(&key, text);
            set_string(model, &["metadata", "labels", &key], text);
            assert_eq!(
                object.label(&key),
                Some(text.as_str()),
                "set_label then label"
            );
        }
        Edit::RemoveLabel(key) => {
            let key = key.text();
            let removed = object.remove_label(&key);
            let expected = remove(model, &["metadata", "labels", &key]);
            assert_eq!(
                removed,
                expected.and_then(|v| v.as_str().map(str::to_owned))
            );
            assert_eq!(object.label(&key), None);
        }
        Edit::SetAnnotation(key, text) => {
            let key = key.text();
            object.set_annotation(&key, text);
            set_string(model, &["metadata", "annotations", &key], text);
            assert_eq!(object.annotation(&key), Some(text.as_str()));
        }
        Edit::RemoveAnnotation(key) => {
            let key = key.text();
            let removed = object.remove_annotation(&key);
            let expected = remove(model, &["metadata", "annotations", &key]);
            assert_eq!(
                removed,
                expected.and_then(|v| v.as_str().map(str::to_owned))
            );
            assert_eq!(object.annotation(&key), None);
        }
        Edit::Set(keys, new) | Edit::Update(keys, new) => {
            let path = path(keys);
            let keys: Vec<&str> = path.split('.').collect();
            let new = new.value();
            let before = walk(model, &keys).cloned();
            let (done, expected) = match edit {
                Edit::Set(..) => (
                    object.set(&path, new.clone()),
                    set(model, &keys, new.clone()),
                ),
                _ => {
                    let changes = before.as_ref() != Some(&new);
                    let done = object.update(&path, new.clone());
                    (done, changes && set(model, &keys, new.clone()))
                }
            };
            assert_eq!(done, expected, "set {path}");
            if done {
                assert_eq!(object.get(&path), Some(&new), "set {path} then get");
            }
        }
        Edit::Remove(keys) => {
            let path = path(keys);
            let keys: Vec<&str> = path.split('.').collect();
            assert_eq!(object.remove(&path), remove(model, &keys), "remove {path}");
            if walk(model, &keys).is_none() {
                assert_eq!(object.get(&path), None, "remove {path} then get");
            }
        }
        Edit::GetMut(keys, new) => {
            let path = path(keys);
            let keys: Vec<&str> = path.split('.').collect();
            let found = object
                .get_mut(&path)
                .map(|value| *value = new.value())
                .is_some();
            let expected = walk_mut(model, &keys)
                .map(|value| *value = new.value())
                .is_some();
            assert_eq!(found, expected, "get_mut {path}");
        }
        Edit::SetSpec(keys, new) | Edit::SetStatus(keys, new) => {
            let (top, done) = match edit {
                Edit::SetSpec(..) => ("spec", object.set_spec(&path(keys), new.value())),
                _ => ("status", object.set_status(&path(keys), new.value())),
            };
            let full = format!("{top}.{}", path(keys));
            let keys: Vec<&str> = full.split('.').collect();
            assert_eq!(done, set(model, &keys, new.value()), "set {full}");
        }
        Edit::RetainEven(key) => {
            let key = key.text();
            let mut index = 0;
            let removed = object.retain_items(&key, |_| {
                index += 1;
                index % 2 == 1
            });
            let expected = match model.get_mut(&key) {
                Some(Value::Array(items)) => {
                    let before = items.len();
                    let mut index = 0;
                    items.retain(|_| {
                        index += 1;
                        index % 2 == 1
                    });
                    items.len() != before
                }
                _ => false,
            };
            assert_eq!(removed, expected, "retain_items {key}");
        }
        Edit::Read(_) => {}
        Edit::WholeValue(key, new) => {
            as_object(object.value_mut()).insert(key.text(), new.value());
            as_object(model).insert(key.text(), new.value());
        }
    }
}

/// What the object answers equals what its value holds.
fn reads_agree(object: &Object, model: &Value, edit: &Edit) {
    let text = |keys: &[&str]| walk(model, keys).and_then(Value::as_str);
    assert_eq!(object.name(), text(&["metadata", "name"]));
    assert_eq!(object.namespace(), text(&["metadata", "namespace"]));
    assert_eq!(object.kind(), text(&["kind"]));
    assert_eq!(
        object.resource_version(),
        text(&["metadata", "resourceVersion"])
    );
    assert_eq!(
        owned(object.labels()),
        strings(walk(model, &["metadata", "labels"]))
    );
    assert_eq!(
        owned(object.annotations()),
        strings(walk(model, &["metadata", "annotations"]))
    );
    if let Edit::Read(keys) = edit {
        let path = path(keys);
        let keys: Vec<&str> = path.split('.').collect();
        assert_eq!(object.get(&path), walk(model, &keys), "get {path}");
    }
}
