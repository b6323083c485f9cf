//! What the fuzz targets share: inputs cut into chunks as a network may cut them, bodies
//! read whole, and JSON checks.

use std::convert::Infallible;

use bytes::Bytes;
use futures_util::stream::{self, Stream};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};

/// An input split in two: its first four bytes seed the chunking, the rest is the body.
/// Seed files are a body with four bytes in front.
pub fn seed_and_body(data: &[u8]) -> Option<(u32, &[u8])> {
    let (seed, body) = data.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*seed), body))
}

/// `body` cut into chunks of 1 to 64 bytes, their lengths drawn from `seed` (xorshift): the
/// splits a network and HTTP/2 framing may make, empty chunks included.
pub fn chunks(body: &[u8], seed: u32) -> Vec<&[u8]> {
    let mut state = seed | 1;
    let mut rest = body;
    let mut out = Vec::new();
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        // One chunk in eight is empty; the others are up to 64 bytes, mostly short.
        let len = match state % 8 {
            0 => 0,
            1 => (state >> 8) as usize % 64 + 1,
            _ => (state >> 8) as usize % 8 + 1,
        }
        .min(rest.len());
        let (chunk, tail) = rest.split_at(len);
        out.push(chunk);
        rest = tail;
    }
    out
}

/// An upstream body that sends `chunks` as its frames.
pub fn upstream(
    chunks: &[&[u8]],
) -> StreamBody<impl Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin + use<>> {
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = chunks
        .iter()
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    StreamBody::new(stream::iter(frames))
}

/// A runtime for the targets that drive async code (one per process).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

/// The bytes of a body, or the number of errors it ended with.
pub async fn read_body<B>(body: B) -> Result<Bytes, String>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    body.collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|error| error.to_string())
}

/// Whether `bytes` is JSON with no object holding a key twice: where keys repeat, the
/// gateway's byte-level readers (first key) and serde_json (last key) may rightly differ.
pub fn json_without_duplicate_keys(bytes: &[u8]) -> bool {
    serde_json::from_slice::<NoDuplicates>(bytes).is_ok()
}

/// A JSON value that fails to deserialize where an object repeats a key.
struct NoDuplicates;

impl<'de> serde::Deserialize<'de> for NoDuplicates {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NoDuplicatesVisitor)
    }
}

struct NoDuplicatesVisitor;

impl<'de> serde::de::Visitor<'de> for NoDuplicatesVisitor {
    type Value = NoDuplicates;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON without repeated keys")
    }
    fn visit_bool<E>(self, _: bool) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_i64<E>(self, _: i64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_u64<E>(self, _: u64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_f64<E>(self, _: f64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_str<E>(self, _: &str) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_unit<E>(self) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<NoDuplicates, A::Error> {
        while seq.next_element::<NoDuplicates>()?.is_some() {}
        Ok(NoDuplicates)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<NoDuplicates, A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !keys.insert(key) {
                return Err(serde::de::Error::custom("a repeated key"));
            }
            map.next_value::<NoDuplicates>()?;
        }
        Ok(NoDuplicates)
    }
}
