//! A whole Kubernetes object in protobuf read by the schema of Kubernetes' own `.proto` files
//! (`kubernetes.binpb`, a descriptor set `protos/` compiles from `k8s.io/api` and
//! `k8s.io/apimachinery` v0.36.3): any kind of `core/v1` and `discovery.k8s.io`, a Pod or a
//! Node as kubelet writes it. Used where a body arrives whole (an offline update), not on
//! streams, which [`super::json`] turns into JSON as they come.
//!
//! The JSON is what a client decodes to the object sent: every field on the wire under its
//! JSON name, Kubernetes' own types as their JSON (`Time` to the second, `MicroTime` to the
//! microsecond, `Quantity` and `IntOrString` as strings or numbers, `FieldsV1` and
//! `RawExtension` as the JSON they hold), bytes in base64. A field the schema does not know is
//! left out when it holds its zero value (an older release's field Go's encoder writes
//! anyway, as 1.20's empty `clusterName`); holding anything else, it makes the object
//! unreadable rather than silently lost.

use std::collections::HashSet;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use prost_reflect::{
    DescriptorPool, DynamicMessage, MapKey, MessageDescriptor, ReflectMessage as _, Value,
};
use serde_json::{Map, Value as Json};

use super::error::TranscodeError;
use super::wire::{Fields, MAGIC, Value as Wire};

/// Kubernetes' descriptors, compiled by `protos/`.
const DESCRIPTORS: &[u8] = include_bytes!("kubernetes.binpb");

/// The Kubernetes release the descriptors were compiled from.
pub const DESCRIBED_RELEASE: &str = "1.36.3";

/// Kubernetes' descriptors, decoded once.
pub(super) static POOL: LazyLock<Result<DescriptorPool, String>> =
    LazyLock::new(|| DescriptorPool::decode(DESCRIPTORS).map_err(|error| error.to_string()));

/// The embedded structs Go's JSON writes inline (`json:",inline"` in the release's
/// `types.go`): protobuf holds each as a field (its name, its message); JSON holds its fields
/// in the enclosing object.
pub(super) const INLINE: [(&str, &str); 5] = [
    ("volumeSource", "VolumeSource"),
    ("persistentVolumeSource", "PersistentVolumeSource"),
    ("localObjectReference", "LocalObjectReference"),
    ("handler", "ProbeHandler"),
    ("ephemeralContainerCommon", "EphemeralContainerCommon"),
];

/// The nesting deepest an object may reach (Kubernetes' own objects stay far below it).
pub(super) const MAX_DEPTH: usize = 64;

/// The object `body` (`k8s\0` and a `runtime.Unknown`) as the JSON kube-apiserver would
/// take for it.
pub fn protobuf_object_json(body: &[u8]) -> Result<Json, TranscodeError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or(TranscodeError::Malformed("no k8s\\0 magic"))?;
    let (mut api_version, mut kind, mut raw) = ("", "", &[][..]);
    for field in Fields::of(envelope) {
        match field? {
            (1, Wire::Bytes(type_meta)) => {
                for field in Fields::of(type_meta) {
                    match field? {
                        (1, Wire::Bytes(v)) => api_version = super::json::utf8(v)?,
                        (2, Wire::Bytes(k)) => kind = super::json::utf8(k)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(bytes)) => raw = bytes,
            (3, Wire::Bytes(encoding)) if !encoding.is_empty() => {
                return Err(TranscodeError::Encoded(
                    String::from_utf8_lossy(encoding).into_owned(),
                ));
            }
            _ => {}
        }
    }
    let descriptor = message_of(api_version, kind)?;
    let message = DynamicMessage::decode(descriptor, raw)
        .map_err(|_| TranscodeError::Malformed("not the message its kind names"))?;
    let Json::Object(mut fields) = to_json(&message, 0)? else {
        return Err(TranscodeError::Malformed("not an object"));
    };
    let mut object = Map::new();
    object.insert("kind".into(), kind.into());
    object.insert("apiVersion".into(), api_version.into());
    object.append(&mut fields);
    Ok(Json::Object(object))
}

/// Whether the schema holds `group`'s `version` (`""` the core group), so that any of its
/// kinds can be written in protobuf: the packages `protos/` compiles (core, discovery).
pub fn describes(group: &str, version: &str) -> bool {
    static PACKAGES: LazyLock<HashSet<String>> = LazyLock::new(|| {
        let Ok(pool) = POOL.as_ref() else {
            return HashSet::new();
        };
        pool.all_messages()
            .map(|message| message.package_name().to_owned())
            .collect()
    });
    let package = group
        .split('.')
        .next()
        .filter(|g| !g.is_empty())
        .unwrap_or("core");
    PACKAGES.contains(&format!("k8s.io.api.{package}.{version}"))
}

/// The message of `kind` in `apiVersion`: Kubernetes names a group's package after the
/// group's first label (`k8s.io.api.discovery.v1`), the core group's `core`; meta's kinds
/// (`DeleteOptions`) are in every group version.
pub(super) fn message_of(
    api_version: &str,
    kind: &str,
) -> Result<MessageDescriptor, TranscodeError> {
    let pool = POOL
        .as_ref()
        .map_err(|error| TranscodeError::Unreadable(format!("the descriptors: {error}")))?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let package = group
        .split('.')
        .next()
        .filter(|g| !g.is_empty())
        .unwrap_or("core");
    pool.get_message_by_name(&format!("k8s.io.api.{package}.{version}.{kind}"))
        // Every group version holds meta's options too (a delete's `DeleteOptions`).
        .or_else(|| {
            pool.get_message_by_name(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}"))
        })
        .ok_or_else(|| TranscodeError::UnknownKind(format!("{kind} of {api_version}")))
}

fn to_json(message: &DynamicMessage, depth: usize) -> Result<Json, TranscodeError> {
    if depth > MAX_DEPTH {
        return Err(TranscodeError::Malformed("nested too deep"));
    }
    let descriptor = message.descriptor();
    match descriptor.full_name() {
        "k8s.io.apimachinery.pkg.apis.meta.v1.Time" => return Ok(time(message, false)),
        "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime" => return Ok(time(message, true)),
        "k8s.io.apimachinery.pkg.api.resource.Quantity" => {
            return Ok(string_field(message, 1).into());
        }
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => return Ok(int_or_string(message)),
        "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1"
        | "k8s.io.apimachinery.pkg.runtime.RawExtension" => return raw_json(message),
        "k8s.io.apimachinery.pkg.apis.meta.v1.Duration" => {
            return Err(TranscodeError::Unreadable(
                "a meta.v1.Duration is not read from protobuf".into(),
            ));
        }
        _ => {}
    }
    for unknown in message.unknown_fields() {
        let mut encoded = Vec::new();
        unknown.encode(&mut encoded);
        let zero = matches!(
            Fields::of(&encoded).next(),
            Some(Ok((_, Wire::Varint(0) | Wire::Bytes([]))))
        );
        if !zero {
            return Err(TranscodeError::Unreadable(format!(
                "field {} of {} is not known to Kubernetes {DESCRIBED_RELEASE}",
                unknown.number(),
                descriptor.name()
            )));
        }
    }
    let mut object = Map::new();
    for (field, value) in message.fields() {
        if let Value::Message(embedded) = value
            && INLINE.contains(&(field.name(), embedded.descriptor().name()))
        {
            if let Json::Object(mut inlined) = to_json(embedded, depth + 1)? {
                object.append(&mut inlined);
            }
            continue;
        }
        let json = if field.is_map() {
            let Value::Map(entries) = value else {
                return Err(TranscodeError::Malformed("a map that is not"));
            };
            let mut map = Map::new();
            for (key, value) in entries {
                let key = match key {
                    MapKey::String(key) => key.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(n) => n.to_string(),
                    MapKey::I64(n) => n.to_string(),
                    MapKey::U32(n) => n.to_string(),
                    MapKey::U64(n) => n.to_string(),
                };
                map.insert(key, value_json(value, depth)?);
            }
            Json::Object(map)
        } else {
            value_json(value, depth)?
        };
        object.insert(field.name().to_owned(), json);
    }
    Ok(Json::Object(object))
}

fn value_json(value: &Value, depth: usize) -> Result<Json, TranscodeError> {
    Ok(match value {
        Value::Bool(b) => (*b).into(),
        Value::I32(n) => (*n).into(),
        Value::I64(n) => (*n).into(),
        Value::U32(n) => (*n).into(),
        Value::U64(n) => (*n).into(),
        Value::F32(n) => Json::from(f64::from(*n)),
        Value::F64(n) => Json::from(*n),
        Value::String(s) => s.as_str().into(),
        Value::Bytes(b) => base64::engine::general_purpose::STANDARD.encode(b).into(),
        Value::EnumNumber(n) => (*n).into(),
        Value::Message(m) => to_json(m, depth + 1)?,
        Value::List(values) => Json::Array(
            values
                .iter()
                .map(|v| value_json(v, depth))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(_) => return Err(TranscodeError::Malformed("a map within a list")),
    })
}

fn string_field(message: &DynamicMessage, number: u32) -> String {
    match message.get_field_by_number(number).as_deref() {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

fn int_field(message: &DynamicMessage, number: u32) -> i64 {
    match message.get_field_by_number(number).as_deref() {
        Some(Value::I64(n)) => *n,
        Some(Value::I32(n)) => i64::from(*n),
        _ => 0,
    }
}

/// `meta.v1.Time` (to the second) or `MicroTime` (to the microsecond), in UTC; the zero
/// time, which Go's encoder writes as an empty message, is `null`.
fn time(message: &DynamicMessage, micro: bool) -> Json {
    let (seconds, nanos) = (int_field(message, 1), int_field(message, 2));
    let at = u64::try_from(seconds)
        .ok()
        .filter(|s| *s <= super::json::LAST_SECOND as u64)
        .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s));
    match at {
        None => Json::Null,
        Some(_) if seconds == 0 && nanos == 0 => Json::Null,
        Some(at) if micro => {
            let micros = u64::try_from(nanos / 1000).unwrap_or(0);
            humantime::format_rfc3339_micros(at + Duration::from_micros(micros))
                .to_string()
                .into()
        }
        Some(at) => humantime::format_rfc3339_seconds(at).to_string().into(),
    }
}

/// `util.intstr.IntOrString`: a number (type 0) or a string (type 1).
fn int_or_string(message: &DynamicMessage) -> Json {
    if int_field(message, 1) == 1 {
        string_field(message, 3).into()
    } else {
        int_field(message, 2).into()
    }
}

/// A message whose field 1 holds JSON (`FieldsV1`'s `Raw`, `RawExtension`'s `raw`),
/// written as that JSON; empty, `null`.
fn raw_json(message: &DynamicMessage) -> Result<Json, TranscodeError> {
    let raw = match message.get_field_by_number(1).as_deref() {
        Some(Value::Bytes(raw)) => raw.clone(),
        _ => Default::default(),
    };
    if raw.is_empty() {
        return Ok(Json::Null);
    }
    serde_json::from_slice(&raw).map_err(|_| TranscodeError::NotJson)
}

#[cfg(test)]
mod tests;
