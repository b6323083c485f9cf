//! A Kubernetes object's JSON written in Kubernetes' protobuf (`k8s\0` and a
//! `runtime.Unknown`), by the schema of Kubernetes' own `.proto` files: the inverse of
//! [`super::described`], for a client that takes protobuf only. Every member goes to its
//! field (an inlined struct's members to the struct), Kubernetes' own types from their JSON
//! (`Time`, `MicroTime`, `Quantity`, `IntOrString`, `FieldsV1` and `RawExtension`); a member
//! the schema does not know makes the object unwritable rather than silently lost.

use std::collections::HashMap;

use base64::Engine as _;
use prost_reflect::prost::Message as _;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value};
use serde_json::{Map, Value as Json};

use super::described::{DESCRIBED_RELEASE, INLINE, MAX_DEPTH, message_of};
use super::error::TranscodeError;
use super::wire::MAGIC;

/// `object` (a JSON object with its `apiVersion` and `kind`) in Kubernetes' protobuf, as
/// kube-apiserver sends it to a protobuf client.
pub fn json_object_protobuf(object: &Json) -> Result<Vec<u8>, TranscodeError> {
    let text = |name: &str| object.get(name).and_then(Json::as_str).unwrap_or_default();
    json_object_protobuf_as(object, text("apiVersion"), text("kind"))
}

/// `object` in Kubernetes' protobuf as an object of `kind` in `api_version`: a list's item,
/// stored without them, has them from its list.
pub fn json_object_protobuf_as(
    object: &Json,
    api_version: &str,
    kind: &str,
) -> Result<Vec<u8>, TranscodeError> {
    let descriptor = message_of(api_version, kind)?;
    let raw = item_message(&descriptor, object)?;
    Ok(envelope(api_version, kind, &raw))
}

/// A watch event of `kind` (`ADDED`, …) holding `object` (its protobuf envelope), framed as
/// kube-apiserver frames a protobuf watch: a 4-byte big-endian length, then a
/// `meta.v1.WatchEvent`.
pub fn watch_frame(kind: &str, object: &[u8]) -> Vec<u8> {
    let mut raw_extension = Vec::with_capacity(object.len() + 8);
    put_bytes(&mut raw_extension, 1, object);
    let mut event = Vec::with_capacity(raw_extension.len() + kind.len() + 8);
    put_bytes(&mut event, 1, kind.as_bytes());
    put_bytes(&mut event, 2, &raw_extension);
    let length = u32::try_from(event.len()).unwrap_or(u32::MAX);
    let mut frame = Vec::with_capacity(event.len() + 4);
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend_from_slice(&event);
    frame
}

/// A list written in protobuf as its items stream: the head (with the length of what
/// follows, so the items' encoded lengths are summed first), each item, then the tail.
pub struct ListEncoder {
    api_version: String,
    list_kind: String,
    item: MessageDescriptor,
}

impl ListEncoder {
    /// The encoder of a list of `list_kind` (`PodList`) in `api_version`.
    pub fn new(api_version: &str, list_kind: &str) -> Result<ListEncoder, TranscodeError> {
        let item_kind = list_kind.strip_suffix("List").unwrap_or(list_kind);
        message_of(api_version, list_kind)?;
        Ok(ListEncoder {
            api_version: api_version.to_owned(),
            list_kind: list_kind.to_owned(),
            item: message_of(api_version, item_kind)?,
        })
    }

    /// An item as the list holds it: its field (2, `items`) and message.
    pub fn item(&self, object: &Json) -> Result<Vec<u8>, TranscodeError> {
        let raw = item_message(&self.item, object)?;
        let mut field = Vec::with_capacity(raw.len() + 6);
        put_bytes(&mut field, 2, &raw);
        Ok(field)
    }

    /// The list's head: the envelope up to its items, `meta` its `ListMeta` (`metadata`) and
    /// `items` the length of all its items' fields.
    pub fn head(&self, meta: &ListMeta<'_>, items: usize) -> Vec<u8> {
        let mut list_meta = Vec::new();
        put_bytes(&mut list_meta, 2, meta.resource_version.as_bytes());
        if let Some(token) = meta.continue_token {
            put_bytes(&mut list_meta, 3, token.as_bytes());
        }
        if let Some(remaining) = meta.remaining {
            put_varint(&mut list_meta, 4 << 3);
            put_varint(&mut list_meta, remaining);
        }
        let mut metadata = Vec::with_capacity(list_meta.len() + 6);
        put_bytes(&mut metadata, 1, &list_meta);
        let mut type_meta = Vec::new();
        put_bytes(&mut type_meta, 1, self.api_version.as_bytes());
        put_bytes(&mut type_meta, 2, self.list_kind.as_bytes());
        let mut head = Vec::with_capacity(MAGIC.len() + type_meta.len() + metadata.len() + 16);
        head.extend_from_slice(MAGIC);
        put_bytes(&mut head, 1, &type_meta);
        put_varint(&mut head, 2 << 3 | 2);
        put_varint(&mut head, (metadata.len() + items) as u64);
        head.extend_from_slice(&metadata);
        head
    }

    /// What follows the items: the envelope's (empty) `contentEncoding` and `contentType`.
    pub fn tail(&self) -> &'static [u8] {
        b"\x1a\x00\x22\x00"
    }
}

/// A list's `ListMeta`, as its protobuf head holds it.
pub struct ListMeta<'a> {
    /// `resourceVersion`.
    pub resource_version: &'a str,
    /// `continue`, if more follow.
    pub continue_token: Option<&'a str>,
    /// `remainingItemCount`, if known.
    pub remaining: Option<u64>,
}

/// The message of `object` (its `apiVersion` and `kind` aside), encoded.
fn item_message(descriptor: &MessageDescriptor, object: &Json) -> Result<Vec<u8>, TranscodeError> {
    let Json::Object(members) = object else {
        return Err(TranscodeError::Malformed("not an object"));
    };
    Ok(object_message(descriptor, members, 0)?.encode_to_vec())
}

/// `raw` in the envelope kube-apiserver writes: `k8s\0`, then a `runtime.Unknown` of its
/// `TypeMeta`, `raw` and (empty) `contentEncoding` and `contentType`, each field written as
/// Go's encoder writes it.
pub(super) fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::with_capacity(api_version.len() + kind.len() + 4);
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(MAGIC.len() + type_meta.len() + raw.len() + 16);
    out.extend_from_slice(MAGIC);
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    out
}

/// Writes field `number` as length-delimited `bytes`.
pub(super) fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_varint(out, u64::from(number << 3 | 2));
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Writes `value` as a protobuf varint.
pub(super) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn object_message(
    descriptor: &MessageDescriptor,
    members: &Map<String, Json>,
    depth: usize,
) -> Result<DynamicMessage, TranscodeError> {
    if depth > MAX_DEPTH {
        return Err(TranscodeError::Malformed("nested too deep"));
    }
    let mut message = DynamicMessage::new(descriptor.clone());
    let mut inlined: HashMap<String, Map<String, Json>> = HashMap::new();
    for (name, json) in members {
        // The object's own type is the envelope's, not a field of its message.
        let type_meta = depth == 0 && (name == "apiVersion" || name == "kind");
        if json.is_null() || type_meta {
            continue;
        }
        if let Some(field) = descriptor.get_field_by_name(name) {
            let value = value(&field, json, depth)?;
            message
                .try_set_field(&field, value)
                .map_err(|_| TranscodeError::Malformed("a member of the wrong type"))?;
            continue;
        }
        let inline = inline_fields(descriptor)
            .find(|(_, inner)| inner.get_field_by_name(name).is_some())
            .ok_or_else(|| unknown(descriptor, name))?;
        inlined
            .entry(inline.0.name().to_owned())
            .or_default()
            .insert(name.clone(), json.clone());
    }
    for (name, members) in inlined {
        let Some(field) = descriptor.get_field_by_name(&name) else {
            continue;
        };
        let Kind::Message(inner) = field.kind() else {
            continue;
        };
        let value = Value::Message(from_json(&inner, &Json::Object(members), depth + 1)?);
        message
            .try_set_field(&field, value)
            .map_err(|_| TranscodeError::Malformed("an inlined struct of the wrong type"))?;
    }
    Ok(message)
}

/// The fields of `descriptor` that Go's JSON writes inline, with their messages.
fn inline_fields(
    descriptor: &MessageDescriptor,
) -> impl Iterator<Item = (FieldDescriptor, MessageDescriptor)> + '_ {
    descriptor.fields().filter_map(|field| match field.kind() {
        Kind::Message(inner) if INLINE.contains(&(field.name(), inner.name())) => {
            Some((field, inner))
        }
        _ => None,
    })
}

fn unknown(descriptor: &MessageDescriptor, name: &str) -> TranscodeError {
    TranscodeError::Unreadable(format!(
        "member {name:?} of {} is not known to Kubernetes {DESCRIBED_RELEASE}",
        descriptor.name()
    ))
}

/// A message from its JSON, Kubernetes' own types from theirs.
fn from_json(
    descriptor: &MessageDescriptor,
    json: &Json,
    depth: usize,
) -> Result<DynamicMessage, TranscodeError> {
    let mut message = DynamicMessage::new(descriptor.clone());
    let mut set = |number: u32, value: Value| {
        message
            .try_set_field_by_number(number, value)
            .map_err(|_| TranscodeError::Malformed("a field of the wrong type"))
    };
    match (descriptor.full_name(), json) {
        ("k8s.io.apimachinery.pkg.apis.meta.v1.Time", Json::String(at)) => {
            let (seconds, _) = instant(at)?;
            set(1, Value::I64(seconds))?;
            set(2, Value::I32(0))?;
        }
        ("k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime", Json::String(at)) => {
            let (seconds, nanos) = instant(at)?;
            set(1, Value::I64(seconds))?;
            set(2, Value::I32(nanos))?;
        }
        ("k8s.io.apimachinery.pkg.api.resource.Quantity", json) => {
            let text = match json {
                Json::String(text) => text.clone(),
                Json::Number(n) => n.to_string(),
                _ => return Err(TranscodeError::Malformed("a quantity that is not")),
            };
            set(1, Value::String(text))?;
        }
        ("k8s.io.apimachinery.pkg.util.intstr.IntOrString", json) => {
            let (kind, number, text) = match json {
                Json::Number(n) => (0, n.as_i64().unwrap_or_default(), String::new()),
                Json::String(text) => (1, 0, text.clone()),
                _ => {
                    return Err(TranscodeError::Malformed(
                        "an int-or-string that is neither",
                    ));
                }
            };
            set(1, Value::I64(kind))?;
            set(2, Value::I32(i32::try_from(number).unwrap_or_default()))?;
            set(3, Value::String(text))?;
        }
        (
            "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1"
            | "k8s.io.apimachinery.pkg.runtime.RawExtension",
            json,
        ) => {
            let raw = serde_json::to_vec(json).map_err(|_| TranscodeError::NotJson)?;
            set(1, Value::Bytes(raw.into()))?;
        }
        ("k8s.io.apimachinery.pkg.apis.meta.v1.Duration", _) => {
            return Err(TranscodeError::Unreadable(
                "a meta.v1.Duration is not written to protobuf".into(),
            ));
        }
        (_, Json::Object(members)) => return object_message(descriptor, members, depth),
        _ => return Err(TranscodeError::Malformed("a message that is not an object")),
    }
    Ok(message)
}

/// A field's value from its JSON.
fn value(field: &FieldDescriptor, json: &Json, depth: usize) -> Result<Value, TranscodeError> {
    if field.is_map() {
        let (Json::Object(entries), Kind::Message(entry)) = (json, field.kind()) else {
            return Err(TranscodeError::Malformed("a map that is not an object"));
        };
        let value_field = entry.map_entry_value_field();
        let mut map = HashMap::with_capacity(entries.len());
        for (key, json) in entries {
            map.insert(
                MapKey::String(key.clone()),
                single(&value_field, json, depth)?,
            );
        }
        return Ok(Value::Map(map));
    }
    if field.is_list() {
        let Json::Array(items) = json else {
            return Err(TranscodeError::Malformed("a list that is not an array"));
        };
        let values = items
            .iter()
            .map(|item| single(field, item, depth))
            .collect::<Result<_, _>>()?;
        return Ok(Value::List(values));
    }
    single(field, json, depth)
}

/// One value of `field`'s kind from its JSON.
fn single(field: &FieldDescriptor, json: &Json, depth: usize) -> Result<Value, TranscodeError> {
    let wrong = || TranscodeError::Malformed("a member of the wrong type");
    let integer = || json.as_i64().ok_or_else(wrong);
    Ok(match field.kind() {
        Kind::String => Value::String(json.as_str().ok_or_else(wrong)?.to_owned()),
        Kind::Bool => Value::Bool(json.as_bool().ok_or_else(wrong)?),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            Value::I32(i32::try_from(integer()?).map_err(|_| wrong())?)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(integer()?),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(u32::try_from(integer()?).map_err(|_| wrong())?),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(json.as_u64().ok_or_else(wrong)?),
        Kind::Double => Value::F64(json.as_f64().ok_or_else(wrong)?),
        Kind::Float => Value::F32(json.as_f64().ok_or_else(wrong)? as f32),
        Kind::Bytes => {
            let text = json.as_str().ok_or_else(wrong)?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|_| TranscodeError::Malformed("bytes that are not base64"))?;
            Value::Bytes(bytes.into())
        }
        Kind::Enum(_) => return Err(TranscodeError::Malformed("an enum Kubernetes does not use")),
        Kind::Message(inner) => Value::Message(from_json(&inner, json, depth + 1)?),
    })
}

/// An RFC 3339 time as seconds and nanoseconds since the epoch.
fn instant(at: &str) -> Result<(i64, i32), TranscodeError> {
    let time = humantime::parse_rfc3339_weak(at)
        .map_err(|_| TranscodeError::Malformed("a time that is not RFC 3339"))?;
    let since = time
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_err(|_| TranscodeError::Malformed("a time before 1970"))?;
    let seconds =
        i64::try_from(since.as_secs()).map_err(|_| TranscodeError::Malformed("a time too late"))?;
    Ok((seconds, since.subsec_nanos() as i32))
}

#[cfg(test)]
mod tests;
