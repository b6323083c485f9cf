//! The stand-in's protobuf: kube-apiserver 1.20's `discovery.k8s.io/v1beta1` EndpointSlices
//! in Kubernetes' protobuf made the `v1` ones a 1.21+ apiserver sends, field by field on the
//! wire, by the field numbers of `k8s.io/api/discovery/{v1beta1,v1}/generated.proto`.
//!
//! An object is `k8s\0` and a `runtime.Unknown` (1 `TypeMeta` {1 apiVersion, 2 kind}, 2 the
//! message, 3 contentEncoding, 4 contentType); a watch is frames of a 4-byte big-endian
//! length and a `meta.v1.WatchEvent` (1 type, 2 `RawExtension` {1 raw: an object}). The two
//! `Endpoint`s differ only after `targetRef` (4):
//!
//! | v1beta1 | v1 |
//! |---|---|
//! | 5 `topology` (map) | 5 `deprecatedTopology` (map) |
//! | 6 `nodeName` | 6 `nodeName` |
//! | 7 `hints` | 7 `zone`, 8 `hints` |
//!
//! The conversion of those fields is [`crate::standin_json`]'s; every other field keeps its
//! bytes and its place. Maps are written sorted by key, as Go's generated code writes them.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use bytes::{Buf, BytesMut};

use crate::standin_json::{V1, V1BETA1, topology_to_v1};

/// The prefix of every object Kubernetes encodes in protobuf.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

/// A field's value on the wire.
#[derive(Clone, Copy)]
pub(crate) enum Wire<'a> {
    Varint(u64),
    Fixed64(&'a [u8]),
    Bytes(&'a [u8]),
    Fixed32(&'a [u8]),
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at).context("a varint cut short")?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(value);
        }
    }
    bail!("a varint over 64 bits")
}

/// The fields of a message, in the order they were written.
pub(crate) fn fields(bytes: &[u8]) -> Result<Vec<(u32, Wire<'_>)>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let tag = u32::try_from(key >> 3)?;
        let value = match key & 7 {
            0 => Wire::Varint(varint(bytes, &mut at)?),
            1 => Wire::Fixed64(take(bytes, &mut at, 8)?),
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?)?;
                Wire::Bytes(take(bytes, &mut at, len)?)
            }
            5 => Wire::Fixed32(take(bytes, &mut at, 4)?),
            kind => bail!("wire type {kind} of field {tag}"),
        };
        out.push((tag, value));
    }
    Ok(out)
}

/// The next `n` bytes at `at`.
fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8]> {
    let end = at.checked_add(n).filter(|end| *end <= bytes.len());
    let value = &bytes[*at..end.context("a field cut short")?];
    *at += n;
    Ok(value)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Writes field `tag` holding `value`.
pub(crate) fn put(out: &mut Vec<u8>, tag: u32, value: Wire<'_>) {
    let kind = match value {
        Wire::Varint(_) => 0,
        Wire::Fixed64(_) => 1,
        Wire::Bytes(_) => 2,
        Wire::Fixed32(_) => 5,
    };
    put_varint(out, u64::from(tag) << 3 | kind);
    match value {
        Wire::Varint(v) => put_varint(out, v),
        Wire::Bytes(b) => {
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Wire::Fixed64(b) | Wire::Fixed32(b) => out.extend_from_slice(b),
    }
}

/// The bytes of a length-delimited field; `what` names it in the error.
pub(crate) fn bytes_of<'a>(value: Wire<'a>, what: &str) -> Result<&'a [u8]> {
    match value {
        Wire::Bytes(bytes) => Ok(bytes),
        _ => bail!("{what} is not length-delimited"),
    }
}

fn string_of(value: Wire<'_>, what: &str) -> Result<String> {
    Ok(std::str::from_utf8(bytes_of(value, what)?)?.to_owned())
}

/// The `v1` of a v1beta1 object of the discovery group (`k8s\0` and a `runtime.Unknown`):
/// an EndpointSlice or a list of them; anything else (a `Status`) is returned as it is.
pub fn object_to_v1(body: &[u8]) -> Result<Vec<u8>> {
    let unknown = body
        .strip_prefix(MAGIC)
        .context("an object without the k8s\\0 prefix")?;
    let fields = fields(unknown)?;
    let (mut api_version, mut kind) = (String::new(), String::new());
    for (tag, value) in &fields {
        if *tag == 1 {
            for (tag, value) in self::fields(bytes_of(*value, "TypeMeta")?)? {
                match tag {
                    1 => api_version = string_of(value, "apiVersion")?,
                    2 => kind = string_of(value, "kind")?,
                    _ => {}
                }
            }
        }
    }
    let convert: fn(&[u8]) -> Result<Vec<u8>> = match kind.as_str() {
        _ if api_version != V1BETA1 => return Ok(body.to_vec()),
        "EndpointSlice" => slice,
        "EndpointSliceList" => list,
        _ => return Ok(body.to_vec()),
    };
    let mut out = MAGIC.to_vec();
    for (tag, value) in fields {
        match tag {
            1 => {
                let mut type_meta = Vec::new();
                put(&mut type_meta, 1, Wire::Bytes(V1.as_bytes()));
                put(&mut type_meta, 2, Wire::Bytes(kind.as_bytes()));
                put(&mut out, 1, Wire::Bytes(&type_meta));
            }
            2 => put(&mut out, 2, Wire::Bytes(&convert(bytes_of(value, "raw")?)?)),
            _ => put(&mut out, tag, value),
        }
    }
    Ok(out)
}

/// An `EndpointSliceList` (1 metadata, 2 items).
fn list(message: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(message.len());
    for (tag, value) in fields(message)? {
        match tag {
            2 => put(&mut out, 2, Wire::Bytes(&slice(bytes_of(value, "items")?)?)),
            _ => put(&mut out, tag, value),
        }
    }
    Ok(out)
}

/// An `EndpointSlice` (1 metadata, 2 endpoints, 3 ports, 4 addressType).
fn slice(message: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(message.len());
    for (tag, value) in fields(message)? {
        match tag {
            2 => put(
                &mut out,
                2,
                Wire::Bytes(&endpoint(bytes_of(value, "endpoint")?)?),
            ),
            _ => put(&mut out, tag, value),
        }
    }
    Ok(out)
}

/// A v1beta1 `Endpoint` made a v1 one.
fn endpoint(message: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(message.len());
    let (mut topology, mut node_name, mut hints) = (None, None, None);
    for (tag, value) in fields(message)? {
        match tag {
            1..=4 => put(&mut out, tag, value),
            5 => {
                let (mut key, mut text) = (String::new(), String::new());
                for (tag, value) in fields(bytes_of(value, "a topology entry")?)? {
                    match tag {
                        1 => key = string_of(value, "a topology key")?,
                        2 => text = string_of(value, "a topology value")?,
                        _ => bail!("field {tag} in a topology entry"),
                    }
                }
                topology.get_or_insert_with(BTreeMap::new).insert(key, text);
            }
            6 => node_name = Some(string_of(value, "nodeName")?),
            7 => hints = Some(bytes_of(value, "hints")?),
            _ => bail!("field {tag} of a v1beta1 Endpoint the stand-in does not know"),
        }
    }
    let (deprecated, node_name, zone) = topology_to_v1(topology, node_name);
    for (key, text) in deprecated.iter().flatten() {
        let mut entry = Vec::new();
        put(&mut entry, 1, Wire::Bytes(key.as_bytes()));
        put(&mut entry, 2, Wire::Bytes(text.as_bytes()));
        put(&mut out, 5, Wire::Bytes(&entry));
    }
    if let Some(node_name) = node_name {
        put(&mut out, 6, Wire::Bytes(node_name.as_bytes()));
    }
    if let Some(zone) = zone {
        put(&mut out, 7, Wire::Bytes(zone.as_bytes()));
    }
    if let Some(hints) = hints {
        put(&mut out, 8, Wire::Bytes(hints));
    }
    Ok(out)
}

/// A protobuf watch made `v1` frame by frame as its bytes arrive.
#[derive(Default)]
pub struct WatchFrames {
    pending: BytesMut,
}

impl WatchFrames {
    /// Bytes of the watch as they arrived.
    pub fn push(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
    }

    /// The next whole frame, made `v1` (its length before it), if one is pending.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>> {
        let Some(head) = self.pending.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if self.pending.len() < 4 + len {
            return Ok(None);
        }
        self.pending.advance(4);
        let frame = self.pending.split_to(len);
        let event = event(&frame)?;
        let mut out = u32::try_from(event.len())?.to_be_bytes().to_vec();
        out.extend_from_slice(&event);
        Ok(Some(out))
    }

    /// Fails if the watch ended inside a frame.
    pub fn finish(&self) -> Result<()> {
        match self.pending.len() {
            0 => Ok(()),
            left => bail!("the watch ended {left} bytes into a frame"),
        }
    }
}

/// A `WatchEvent`, its object made `v1`.
fn event(frame: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(frame.len());
    for (tag, value) in fields(frame)? {
        if tag != 2 {
            put(&mut out, tag, value);
            continue;
        }
        let mut raw_extension = Vec::new();
        for (tag, value) in fields(bytes_of(value, "the event's object")?)? {
            match tag {
                1 => put(
                    &mut raw_extension,
                    1,
                    Wire::Bytes(&object_to_v1(bytes_of(value, "raw")?)?),
                ),
                _ => put(&mut raw_extension, tag, value),
            }
        }
        put(&mut out, 2, Wire::Bytes(&raw_extension));
    }
    Ok(out)
}
