//! A protobuf message written as the JSON kube-apiserver would write for it: each field the
//! wire holds, under its JSON name, in the schema's order. Go's protobuf encoder writes every
//! field that is not a pointer (an empty string, a zero, `false`) and a pointer field only
//! when set; Go's JSON leaves out the zeros of `omitempty` fields, and so does this, so what
//! is written decodes in a client to the object kube-apiserver held, `ready: false` and all.
//! Empty lists and maps, which the wire cannot carry, are left out (kube-apiserver writes
//! `null` for the few without `omitempty`: the same to a client).

use std::borrow::Cow;
use std::io::Write as _;
use std::time::{Duration, SystemTime};

use super::error::TranscodeError;
use super::schema::{Field, Kind, Message};
use super::wire::{Fields, Value};

/// Seconds since 1970 of 9999-12-31T23:59:59Z: beyond it RFC 3339 has no year.
pub(super) const LAST_SECOND: i64 = 253_402_300_799;

/// Writes `bytes`, a `schema` message, as a JSON object whose first members are `kind` and
/// `apiVersion`.
pub(super) fn object(
    out: &mut Vec<u8>,
    kind: &str,
    api_version: &str,
    bytes: &[u8],
    schema: &Message,
) -> Result<(), TranscodeError> {
    out.extend_from_slice(b"{\"kind\":");
    string(out, kind);
    out.extend_from_slice(b",\"apiVersion\":");
    string(out, api_version);
    members(out, bytes, schema, true)?;
    out.push(b'}');
    Ok(())
}

/// Writes `bytes`, a `schema` message, as a JSON object.
fn message(out: &mut Vec<u8>, bytes: &[u8], schema: &Message) -> Result<(), TranscodeError> {
    out.push(b'{');
    members(out, bytes, schema, false)?;
    out.push(b'}');
    Ok(())
}

/// The members of a message's object, each after a comma when `after_others`.
fn members(
    out: &mut Vec<u8>,
    bytes: &[u8],
    schema: &Message,
    mut after_others: bool,
) -> Result<(), TranscodeError> {
    let mut present: Vec<(usize, Value<'_>)> = Vec::new();
    for field in Fields::of(bytes) {
        let (tag, value) = field?;
        let index = schema.fields.iter().position(|f| f.tag == tag).ok_or(
            TranscodeError::UnknownField {
                message: schema.name,
                tag,
            },
        )?;
        present.push((index, value));
    }
    // The schema's order; a repeated field's values keep theirs.
    present.sort_by_key(|(index, _)| *index);
    let mut rest = present.as_slice();
    while let Some(&(index, _)) = rest.first() {
        let run = rest.iter().take_while(|(i, _)| *i == index).count();
        let (values, left) = rest.split_at(run);
        rest = left;
        let field = &schema.fields[index];
        if field.omit_zero && values.last().is_some_and(|(_, v)| is_zero(*v)) {
            continue;
        }
        if after_others {
            out.push(b',');
        }
        after_others = true;
        string(out, field.name);
        out.push(b':');
        member(out, field, values.iter().map(|(_, v)| *v))?;
    }
    Ok(())
}

/// One member's value: an array of a repeated field's values, an object of a map's entries,
/// or the last value of a single field (as protobuf reads a field sent twice).
fn member<'a>(
    out: &mut Vec<u8>,
    field: &Field,
    mut values: impl ExactSizeIterator<Item = Value<'a>>,
) -> Result<(), TranscodeError> {
    if matches!(field.kind, Kind::Map) {
        out.push(b'{');
        for (i, entry) in values.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            map_entry(out, bytes_of(entry)?)?;
        }
        out.push(b'}');
        return Ok(());
    }
    if field.repeated {
        out.push(b'[');
        for (i, value) in values.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            scalar(out, &field.kind, value)?;
        }
        out.push(b']');
        return Ok(());
    }
    let last = values.len().saturating_sub(1);
    match values.nth(last) {
        Some(value) => scalar(out, &field.kind, value),
        None => Err(TranscodeError::Malformed("empty member")),
    }
}

fn scalar(out: &mut Vec<u8>, kind: &Kind, value: Value<'_>) -> Result<(), TranscodeError> {
    match kind {
        Kind::String => string(out, &lossy(bytes_of(value)?)),
        Kind::Int => {
            let _ = write!(out, "{}", varint_of(value)? as i64);
        }
        Kind::Bool => out.extend_from_slice(if varint_of(value)? != 0 {
            b"true"
        } else {
            b"false"
        }),
        Kind::Time => time(out, bytes_of(value)?)?,
        Kind::IntOrString => int_or_string(out, bytes_of(value)?)?,
        Kind::RawJson => raw_json(out, bytes_of(value)?)?,
        Kind::Message(schema) => message(out, bytes_of(value)?, schema)?,
        Kind::Map => return Err(TranscodeError::Malformed("map in a list")),
    }
    Ok(())
}

/// A `map<string, string>` entry: `"key":"value"`.
fn map_entry(out: &mut Vec<u8>, entry: &[u8]) -> Result<(), TranscodeError> {
    let (mut key, mut value) = (Cow::Borrowed(""), Cow::Borrowed(""));
    for field in Fields::of(entry) {
        match field? {
            (1, v) => key = lossy(bytes_of(v)?),
            (2, v) => value = lossy(bytes_of(v)?),
            (tag, _) => {
                return Err(TranscodeError::UnknownField {
                    message: "map entry",
                    tag,
                });
            }
        }
    }
    string(out, &key);
    out.push(b':');
    string(out, &value);
    Ok(())
}

/// `meta.v1.Time`: seconds (1) and nanoseconds (2), written to the second as
/// kube-apiserver's JSON does; an empty one (the zero time) is `null`.
fn time(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), TranscodeError> {
    if bytes.is_empty() {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    let mut seconds = 0i64;
    for field in Fields::of(bytes) {
        match field? {
            (1, v) => seconds = varint_of(v)? as i64,
            (2, v) => {
                varint_of(v)?;
            }
            (tag, _) => {
                return Err(TranscodeError::UnknownField {
                    message: "Time",
                    tag,
                });
            }
        }
    }
    let seconds = u64::try_from(seconds)
        .ok()
        .filter(|s| *s as i64 <= LAST_SECOND)
        .ok_or(TranscodeError::Malformed("time out of range"))?;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(seconds);
    let _ = write!(out, "\"{}\"", humantime::format_rfc3339_seconds(at));
    Ok(())
}

/// `util.intstr.IntOrString`: type (1: 0 a number, 1 a string), intVal (2), strVal (3).
fn int_or_string(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), TranscodeError> {
    let (mut is_string, mut int, mut text) = (false, 0i64, Cow::Borrowed(""));
    for field in Fields::of(bytes) {
        match field? {
            (1, v) => is_string = varint_of(v)? == 1,
            (2, v) => int = varint_of(v)? as i64,
            (3, v) => text = lossy(bytes_of(v)?),
            (tag, _) => {
                return Err(TranscodeError::UnknownField {
                    message: "IntOrString",
                    tag,
                });
            }
        }
    }
    if is_string {
        string(out, &text);
    } else {
        let _ = write!(out, "{}", int as i32);
    }
    Ok(())
}

/// A message whose field 1 is JSON (`meta.v1.FieldsV1`), written as it is once checked (UTF-8
/// JSON); empty, `null`.
fn raw_json(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), TranscodeError> {
    let mut raw: &[u8] = &[];
    for field in Fields::of(bytes) {
        match field? {
            (1, v) => raw = bytes_of(v)?,
            (tag, _) => {
                return Err(TranscodeError::UnknownField {
                    message: "FieldsV1",
                    tag,
                });
            }
        }
    }
    if raw.is_empty() {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    // Skipping the values checks the JSON's shape, not that its strings are UTF-8.
    let text = std::str::from_utf8(raw).map_err(|_| TranscodeError::NotJson)?;
    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|_| TranscodeError::NotJson)?;
    out.extend_from_slice(raw);
    Ok(())
}

/// Whether a value is its type's zero: an empty string, `0` or `false`.
fn is_zero(value: Value<'_>) -> bool {
    matches!(value, Value::Varint(0) | Value::Bytes([]))
}

/// `text` as a JSON string.
pub(super) fn string(out: &mut Vec<u8>, text: &str) {
    // Writing a `str` to a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

/// A string of an object: Go does not check that protobuf strings are UTF-8, and its JSON
/// writes each invalid byte as U+FFFD; so does this.
fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// A kind, version or event type, which must be UTF-8.
pub(super) fn utf8(bytes: &[u8]) -> Result<&str, TranscodeError> {
    std::str::from_utf8(bytes).map_err(|_| TranscodeError::NotUtf8)
}

pub(super) fn bytes_of(value: Value<'_>) -> Result<&[u8], TranscodeError> {
    match value {
        Value::Bytes(bytes) => Ok(bytes),
        _ => Err(TranscodeError::Malformed(
            "wire type of a length-delimited field",
        )),
    }
}

fn varint_of(value: Value<'_>) -> Result<u64, TranscodeError> {
    match value {
        Value::Varint(v) => Ok(v),
        _ => Err(TranscodeError::Malformed("wire type of a varint field")),
    }
}
