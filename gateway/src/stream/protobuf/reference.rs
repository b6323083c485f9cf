//! What the protobuf watch fuzz target holds the transcoder to: each whole frame's object as
//! Kubernetes' descriptors read it (`protobuf_object_json`), where the frame is as Go's
//! encoder writes one: each field that is not repeated at most once, each map key once.
//! Elsewhere protobuf's rule (a message sent twice is merged) and the transcoder's (the last
//! one is taken, as for any other field) may rightly differ, and no apiserver sends it.

use std::collections::HashSet;

use prost_reflect::{Kind, MessageDescriptor};
use serde_json::Value as Json;

use super::described::{message_of, protobuf_object_json};
use super::wire::{Fields, MAGIC, Value};
use crate::stream::error::MAX_OBJECT;

/// The nesting deepest a canonical message is checked to.
const MAX_DEPTH: usize = 64;

/// For each whole frame of the protobuf watch body `body`, in order, the JSON of its object
/// as the descriptors read it; `None` for a frame they cannot read or that is not canonical.
pub fn reference_objects(body: &[u8]) -> Vec<Option<Json>> {
    let mut objects = Vec::new();
    let mut rest = body;
    while let Some((head, tail)) = rest.split_first_chunk::<4>() {
        let len = u32::from_be_bytes(*head) as usize;
        if len > MAX_OBJECT || tail.len() < len {
            break;
        }
        let (frame, tail) = tail.split_at(len);
        objects.push(reference(frame));
        rest = tail;
    }
    objects
}

fn reference(frame: &[u8]) -> Option<Json> {
    let frame = match frame.strip_prefix(MAGIC) {
        Some(unknown) => field(unknown, 2)?,
        None => frame,
    };
    let raw = field(field(frame, 2)?, 1)?;
    let envelope = raw.strip_prefix(MAGIC)?;
    let type_meta = field(envelope, 1).unwrap_or_default();
    let api_version = std::str::from_utf8(field(type_meta, 1).unwrap_or_default()).ok()?;
    let kind = std::str::from_utf8(field(type_meta, 2).unwrap_or_default()).ok()?;
    let descriptor = message_of(api_version, kind).ok()?;
    let message = field(envelope, 2).unwrap_or_default();
    canonical(&descriptor, message, 0).then_some(())?;
    protobuf_object_json(raw).ok()
}

/// The last length-delimited field `number` of `message`; `None` if it has none or does not
/// read.
fn field(message: &[u8], number: u32) -> Option<&[u8]> {
    let mut found = None;
    for field in Fields::of(message) {
        match field.ok()? {
            (n, Value::Bytes(bytes)) if n == number => found = Some(bytes),
            _ => {}
        }
    }
    found
}

/// Whether `bytes`, a `descriptor` message, holds each field that is not repeated at most
/// once and each map key once, all the way down.
fn canonical(descriptor: &MessageDescriptor, bytes: &[u8], depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let mut single = HashSet::new();
    let mut keys = HashSet::new();
    for field in Fields::of(bytes) {
        let Ok((number, value)) = field else {
            return false;
        };
        let Some(described) = descriptor.get_field(number) else {
            continue;
        };
        let Kind::Message(inner) = described.kind() else {
            if !described.is_list() && !single.insert(number) {
                return false;
            }
            continue;
        };
        let Value::Bytes(bytes) = value else {
            return false;
        };
        if described.is_map() {
            let key = self::field(bytes, 1).unwrap_or_default();
            if !keys.insert((number, key)) || !canonical(&inner, bytes, depth + 1) {
                return false;
            }
            continue;
        }
        if !described.is_list() && !single.insert(number) {
            return false;
        }
        if !canonical(&inner, bytes, depth + 1) {
            return false;
        }
    }
    true
}
