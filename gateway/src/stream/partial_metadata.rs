//! Objects as `PartialObjectMetadata`: what kube-apiserver sends a client that asks for
//! metadata alone (`Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`,
//! `…List` for a list), made from the whole objects the gateway filtered and cached. Lists
//! and watches are reshaped as they stream.

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::stream::{self, Stream, StreamExt};
use http_body::Frame;
use serde_json::Value as Json;
use serde_json::value::RawValue;

use super::error::FrameError;
use super::event_map::map_events;
use super::list::{ListFrame, ListFramer, head_json};
use super::watch::{Event, EventType};
use crate::error::BoxError;

/// The group version of `PartialObjectMetadata`.
pub const API_VERSION: &str = "meta.k8s.io/v1";

/// `object` (JSON) as a `PartialObjectMetadata`: its `metadata` alone, its bytes as they
/// were (the rest of the object is scanned, not built).
pub fn object(object: &[u8]) -> Result<Bytes, FrameError> {
    #[derive(serde::Deserialize)]
    struct Metadata<'a> {
        #[serde(borrow)]
        metadata: Option<&'a RawValue>,
    }
    let read: Metadata<'_> = serde_json::from_slice(object).map_err(|_| FrameError::Malformed)?;
    let metadata = read.metadata.map_or("{}", RawValue::get);
    let mut out = BytesMut::with_capacity(metadata.len() + 80);
    out.extend_from_slice(b"{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"");
    out.extend_from_slice(API_VERSION.as_bytes());
    out.extend_from_slice(b"\",\"metadata\":");
    out.extend_from_slice(metadata.as_bytes());
    out.put_u8(b'}');
    Ok(out.freeze())
}

/// The JSON watch body `json` with each object as a `PartialObjectMetadata`; an `ERROR`
/// event's `Status` is left as it is.
pub fn watch<S>(json: S) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send
where
    S: Stream<Item = Result<Frame<Bytes>, BoxError>> + Send + 'static,
{
    map_events(json, event)
}

/// One watch event with its object as a `PartialObjectMetadata`, unless it is an error.
fn event(mut event: Event) -> Result<Bytes, BoxError> {
    if event.kind != EventType::Error {
        event.object = object(&event.object)?;
    }
    let mut out = BytesMut::new();
    event.encode(&mut out);
    Ok(out.freeze())
}

/// The JSON list body `json` as a `PartialObjectMetadataList`, item by item.
pub fn list<S>(json: S) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send
where
    S: Stream<Item = Result<Frame<Bytes>, BoxError>> + Send + 'static,
{
    let start = (Box::pin(json), ListFramer::new(), 0usize, false);
    stream::unfold(
        start,
        |(mut json, mut framer, mut items, done)| async move {
            if done {
                return None;
            }
            loop {
                match framer.next_frame() {
                    Ok(Some(frame)) => {
                        let piece = reshaped(frame, &mut items).map(Frame::data);
                        let done = piece.is_err();
                        return Some((piece, (json, framer, items, done)));
                    }
                    Ok(None) => {}
                    Err(error) => return Some((Err(error.into()), (json, framer, items, true))),
                }
                match json.next().await {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            framer.push(&data);
                        }
                    }
                    Some(Err(error)) => return Some((Err(error), (json, framer, items, true))),
                    None => {
                        let last = match framer.finish() {
                            Ok(Some(frame)) => reshaped(frame, &mut items).map(Frame::data),
                            Ok(None) => return None,
                            Err(error) => Err(error.into()),
                        };
                        return Some((last, (json, framer, items, true)));
                    }
                }
            }
        },
    )
}

/// One piece of a JSON list, reshaped; `items` counts the items written so far.
fn reshaped(frame: ListFrame, items: &mut usize) -> Result<Bytes, BoxError> {
    match frame {
        ListFrame::Head(head) => {
            let (head, whole) = head_json(&head).ok_or(FrameError::Malformed)?;
            let metadata = head.get("metadata").unwrap_or(&Json::Null);
            let mut out = format!(
                r#"{{"kind":"PartialObjectMetadataList","apiVersion":"{API_VERSION}","metadata":{metadata},"items":["#
            );
            if whole {
                out.push_str("]}");
            }
            Ok(Bytes::from(out))
        }
        ListFrame::Item(item) => {
            let partial = object(&item)?;
            *items += 1;
            if *items == 1 {
                return Ok(partial);
            }
            let mut out = BytesMut::with_capacity(partial.len() + 1);
            out.put_u8(b',');
            out.extend_from_slice(&partial);
            Ok(out.freeze())
        }
        ListFrame::Tail(_) => Ok(Bytes::from_static(b"]}")),
    }
}

#[cfg(test)]
mod tests;
