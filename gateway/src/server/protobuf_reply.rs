//! A framed response written for a client that takes Kubernetes' protobuf and not JSON. The
//! gateway asks the apiserver for JSON, filters and tees it as for any client, then writes
//! each object by the schema of Kubernetes' `.proto` files, as kube-apiserver writes it.
//!
//! An object and a watch's events are written as they come. A list's head holds the length
//! of all its items, so its items are written to a spool file on the cache's disk first (no
//! list is held in memory), and the list is sent from there with its `Content-Length`.

use std::io::SeekFrom;
use std::path::Path;

use bytes::{Bytes, BytesMut};
use futures_util::stream::{self, Stream, StreamExt};
use http_body::Frame;
use serde_json::Value as Json;
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt, BufWriter};

use crate::error::BoxError;
use crate::stream::{
    Event, ListEncoder, ListFrame, ListFramer, ListMeta, TranscodeError, head_json,
    json_object_protobuf, map_events, watch_frame,
};

/// The bytes of a spooled list read back at once.
const READ_CHUNK: usize = 64 * 1024;

/// Why a response cannot be written in protobuf.
#[derive(Debug, Error)]
pub enum ProtobufReplyError {
    /// An object the schema cannot write (a kind or a field it does not know).
    #[error("the server was unable to respond with a content type that the client supports: {0}")]
    NotAcceptable(#[from] TranscodeError),
    /// The filtered JSON broke off or is not a list.
    #[error("the apiserver's answer could not be read: {0}")]
    Unreadable(BoxError),
    /// The spool file could not be written or read back.
    #[error("the list could not be spooled on the cache's disk: {0}")]
    Spool(#[from] std::io::Error),
}

/// A JSON object (an object's answer, a refusal's `Status`) in protobuf.
pub fn object(json: &[u8]) -> Result<Bytes, ProtobufReplyError> {
    let object: Json = serde_json::from_slice(json).map_err(|_| TranscodeError::NotJson)?;
    Ok(json_object_protobuf(&object)?.into())
}

/// The JSON watch body `json` as a protobuf watch, event by event. An event the schema
/// cannot write ends the body with an error.
pub fn watch<S>(json: S) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send
where
    S: Stream<Item = Result<Frame<Bytes>, BoxError>> + Send + 'static,
{
    map_events(json, event_frame)
}

/// One JSON watch event, framed in protobuf.
fn event_frame(event: Event) -> Result<Bytes, BoxError> {
    let object: Json = serde_json::from_slice(&event.object)?;
    let object = json_object_protobuf(&object)?;
    Ok(watch_frame(event.kind.as_str(), &object).into())
}

/// A list written in protobuf: its length, and its bytes read back from the spool.
pub struct SpooledList {
    /// The body's length in bytes.
    pub length: u64,
    /// The body.
    pub body: std::pin::Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, BoxError>> + Send>>,
}

/// The JSON list body `json` written in protobuf, its items spooled to a file in `dir`
/// (unlinked: it goes when the body is dropped).
pub async fn list<S>(json: S, dir: &Path) -> Result<SpooledList, ProtobufReplyError>
where
    S: Stream<Item = Result<Frame<Bytes>, BoxError>> + Send,
{
    let file = tempfile::tempfile_in(dir)?;
    let mut spool = Spool {
        file: BufWriter::new(tokio::fs::File::from_std(file)),
        encoder: None,
        metadata: Json::Null,
        length: 0,
    };
    let mut framer = ListFramer::new();
    let mut json = std::pin::pin!(json);
    loop {
        while let Some(frame) = framer.next_frame().map_err(unreadable)? {
            spool.take(frame).await?;
        }
        match json.next().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    framer.push(&data);
                }
            }
            Some(Err(error)) => return Err(ProtobufReplyError::Unreadable(error)),
            None => break,
        }
    }
    if let Some(frame) = framer.finish().map_err(unreadable)? {
        spool.take(frame).await?;
    }
    spool.into_list().await
}

/// A list's items being spooled.
struct Spool {
    file: BufWriter<tokio::fs::File>,
    /// The list's encoder, once its head named its kind.
    encoder: Option<ListEncoder>,
    /// The list's `metadata`, from its head or its tail.
    metadata: Json,
    /// The length of the items written.
    length: u64,
}

impl Spool {
    /// Takes in one piece of the JSON list.
    async fn take(&mut self, frame: ListFrame) -> Result<(), ProtobufReplyError> {
        match frame {
            ListFrame::Head(head) => {
                let (head, _) = head_json(&head).ok_or_else(|| {
                    ProtobufReplyError::Unreadable("a list whose head is not JSON".into())
                })?;
                let name = |name: &str| head.get(name).and_then(Json::as_str);
                // kube-apiserver writes them first; a list that does not cannot be written.
                let (Some(api_version), Some(kind)) = (name("apiVersion"), name("kind")) else {
                    return Err(ProtobufReplyError::Unreadable(
                        "a list whose kind does not come before its items".into(),
                    ));
                };
                self.encoder = Some(ListEncoder::new(api_version, kind)?);
                self.metadata = head.get("metadata").cloned().unwrap_or(Json::Null);
            }
            ListFrame::Item(item) => {
                let encoder = self.encoder.as_ref().ok_or_else(|| {
                    ProtobufReplyError::Unreadable("a list item before the list's kind".into())
                })?;
                let item: Json =
                    serde_json::from_slice(&item).map_err(|_| TranscodeError::NotJson)?;
                let field = encoder.item(&item)?;
                self.file.write_all(&field).await?;
                self.length += field.len() as u64;
            }
            ListFrame::Tail(tail) => {
                let mut opened = b"{\"items\":[".to_vec();
                opened.extend_from_slice(&tail);
                let tail: Json = serde_json::from_slice(&opened)
                    .map_err(|e| ProtobufReplyError::Unreadable(e.into()))?;
                if let (Json::Null, Some(metadata)) = (&self.metadata, tail.get("metadata")) {
                    self.metadata = metadata.clone();
                }
            }
        }
        Ok(())
    }

    /// The list whole: its head, the spooled items, its tail.
    async fn into_list(self) -> Result<SpooledList, ProtobufReplyError> {
        let encoder = self
            .encoder
            .ok_or_else(|| ProtobufReplyError::Unreadable("not a list".into()))?;
        let text = |name: &str| self.metadata.get(name).and_then(Json::as_str);
        let meta = ListMeta {
            resource_version: text("resourceVersion").unwrap_or(""),
            continue_token: text("continue").filter(|token| !token.is_empty()),
            remaining: self
                .metadata
                .get("remainingItemCount")
                .and_then(Json::as_u64),
        };
        let items = usize::try_from(self.length).map_err(|_| {
            ProtobufReplyError::Unreadable("a list longer than this machine can address".into())
        })?;
        let head = Bytes::from(encoder.head(&meta, items));
        let tail = Bytes::from_static(encoder.tail());
        let length = head.len() as u64 + self.length + tail.len() as u64;
        let mut file = self.file;
        file.flush().await?;
        let mut file = file.into_inner();
        file.seek(SeekFrom::Start(0)).await?;
        let items = read_back(file, self.length);
        let body = stream::iter([Ok(Frame::data(head))])
            .chain(items)
            .chain(stream::iter([Ok(Frame::data(tail))]));
        Ok(SpooledList {
            length,
            body: Box::pin(body),
        })
    }
}

/// `length` bytes of `file`, in chunks.
fn read_back(
    file: tokio::fs::File,
    length: u64,
) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send {
    stream::unfold((file, length), |(mut file, left)| async move {
        if left == 0 {
            return None;
        }
        let want = usize::try_from(left).map_or(READ_CHUNK, |left| left.min(READ_CHUNK));
        let mut chunk = BytesMut::zeroed(want);
        match file.read_exact(&mut chunk).await {
            Ok(_) => Some((Ok(Frame::data(chunk.freeze())), (file, left - want as u64))),
            Err(error) => Some((Err(error.into()), (file, 0))),
        }
    })
}

/// A framing error, as the reason a list could not be read.
fn unreadable(error: impl Into<BoxError>) -> ProtobufReplyError {
    ProtobufReplyError::Unreadable(error.into())
}

#[cfg(test)]
mod tests;
