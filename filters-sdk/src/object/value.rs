//! Paths through JSON values already parsed: reading, changing and setting the value at a
//! list of keys (a number indexes an array), as [`super::Object`]'s paths do on its bytes.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The value below `value` at `keys`, to change.
pub(super) fn walk_mut<'a>(value: &'a mut Value, keys: &[&str]) -> Option<&'a mut Value> {
    keys.iter().try_fold(value, |value, key| match value {
        Value::Object(map) => map.get_mut(*key),
        Value::Array(items) => items.get_mut(key.parse::<usize>().ok()?),
        _ => None,
    })
}

/// Sets the value below `value` at `keys` (at least one key), adding missing objects on the
/// way (never array items); false, changing nothing, when the path runs through a scalar or
/// past an array's end.
pub(super) fn set_value(value: &mut Value, keys: &[&str], new: Value) -> bool {
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

/// Whether [`set_value`] would set `keys` in `value`: no scalar on the way, no array index
/// past its end.
pub(super) fn can_set_value(value: &Value, keys: &[&str]) -> bool {
    let Some((last, on_the_way)) = keys.split_last() else {
        return false;
    };
    let mut parent = value;
    for key in on_the_way {
        parent = match parent {
            Value::Object(map) => match map.get(*key) {
                Some(child) => child,
                // Objects are added from here on.
                None => return true,
            },
            Value::Array(items) => match key.parse::<usize>().ok().and_then(|i| items.get(i)) {
                Some(item) => item,
                None => return false,
            },
            _ => return false,
        };
    }
    match parent {
        Value::Object(_) => true,
        Value::Array(items) => last.parse::<usize>().is_ok_and(|i| i < items.len()),
        _ => false,
    }
}

/// Removes the entry of the last of `keys` from the object below `value` at the others,
/// returning its value; `None`, changing nothing, when there is none (a path that ends at
/// an array's item removes nothing).
pub(super) fn remove_value(value: &mut Value, keys: &[&str]) -> Option<Value> {
    let (last, on_the_way) = keys.split_last()?;
    walk_mut(value, on_the_way)?.as_object_mut()?.remove(*last)
}

/// Whether `value` is an object with an entry `key`, which [`remove_value`] would remove.
pub(super) fn removes_from_value(value: Option<&Value>, key: &str) -> bool {
    value
        .and_then(Value::as_object)
        .is_some_and(|map| map.contains_key(key))
}

/// Appends `value` encoded as JSON.
pub(super) fn encode<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Strings and values (string keys only) always encode.
    serde_json::to_writer(out, value).expect("a JSON value encodes");
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

/// A value from its JSON text. What the split skipped is checked here: text that is not JSON
/// (or a lone surrogate escape) makes this panic, which in a filter traps the call so the
/// host applies the failure policy.
pub(super) fn parse(text: &[u8]) -> Value {
    match serde_json::from_slice(text) {
        Ok(value) => value,
        Err(error) => panic!("a field of the object does not parse: {error}"),
    }
}

/// `value` as an object, made an empty one if it held something else.
pub(super) fn as_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("the value was just made an object"),
    }
}

/// The object under `key`, made (or made anew, if it held something else) as needed.
pub(super) fn object_entry<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> &'a mut Map<String, Value> {
    as_object(map.entry(key).or_insert_with(|| Value::Object(Map::new())))
}

/// The whole value of bytes that begin as a JSON object; bytes that do not parse whole make
/// this panic, trapping a filter's call.
pub(super) fn parse_whole(raw: &[u8]) -> Value {
    match serde_json::from_slice(raw) {
        Ok(value) => value,
        Err(error) => panic!("the object does not parse whole: {error}"),
    }
}

/// The text of the JSON string `raw` (quotes included) when it needs no unescaping and is
/// valid as it stands: no backslash, no control character, UTF-8.
pub(super) fn plain_string(raw: &[u8]) -> Option<&str> {
    let text = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if text.iter().any(|&byte| byte == b'\\' || byte < 0x20) {
        return None;
    }
    std::str::from_utf8(text).ok()
}

/// The text of a string value.
pub(super) fn into_string(value: Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text),
        _ => None,
    }
}
