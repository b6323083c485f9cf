//! An upstream watch asked for in Kubernetes' protobuf and turned into the JSON watch body
//! kube-apiserver would have sent, as it streams, so framing, filters and the cache read the
//! same events: on the edge link an EndpointSlice's change costs 0.6–0.7 of its JSON (its
//! `managedFields` cross as JSON either way). Only what the gateway knows field by field is
//! asked for so ([`watch_accept`]: Services and EndpointSlices); an event it cannot read (a
//! field a newer cluster added) ends that watch cleanly, its client watches again from its
//! last version, and the resource is asked for as JSON from then on. A refused watch's
//! `Status`, sent in protobuf too, is turned into JSON whole.
//!
//! The stream: frames of a 4-byte big-endian length and a `meta.v1.WatchEvent` (its type
//! and, as a `runtime.RawExtension`, the object: `k8s\0` and a `runtime.Unknown` holding
//! its `apiVersion`, `kind` and encoded message). Memory stays bounded: a frame above
//! [`MAX_OBJECT`] is refused.

mod described;
mod encode;
mod error;
mod json;
#[cfg(test)]
mod recorded;
#[cfg(feature = "fuzzing")]
mod reference;
mod schema;
#[cfg(test)]
mod tests;
mod wire;

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use http::HeaderMap;
use http::header::{CONTENT_TYPE, HeaderValue};
use http_body::{Body, Frame};

use super::error::MAX_OBJECT;
use crate::error::BoxError;
pub use described::{DESCRIBED_RELEASE, describes, protobuf_object_json};
pub use encode::{
    ListEncoder, ListMeta, json_object_protobuf, json_object_protobuf_as, watch_frame,
};
pub use error::TranscodeError;
#[cfg(feature = "fuzzing")]
pub use reference::reference_objects;
use schema::{KNOWN, Known, STATUS};
use wire::{Fields, MAGIC};

/// Kubernetes' protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// A protobuf watch's media type.
pub const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Resources of [`KNOWN`] whose protobuf turned out not to be known: asked for as JSON for
/// the rest of the process's life.
static REFUSED: [AtomicBool; KNOWN.len()] = [const { AtomicBool::new(false) }; KNOWN.len()];

fn known(group: &str, version: &str, resource: &str) -> Option<usize> {
    KNOWN
        .iter()
        .position(|k| k.group == group && k.version == version && k.resource == resource)
}

/// The `Accept` to send upstream for a watch of `resource` the gateway frames: protobuf
/// (JSON the fallback) where it can turn it into JSON; `None` to ask for JSON.
pub fn watch_accept(group: &str, version: &str, resource: &str) -> Option<HeaderValue> {
    let index = known(group, version, resource)?;
    (!REFUSED[index].load(Ordering::Relaxed))
        .then(|| HeaderValue::from_static("application/vnd.kubernetes.protobuf, application/json"))
}

/// Whether a response is a protobuf watch stream.
pub fn is_protobuf_watch(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with(PROTOBUF) && t.contains("stream=watch"))
}

/// Whether a response is a single object in protobuf (a refused request's `Status`).
pub fn is_protobuf_object(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with(PROTOBUF) && !t.contains("stream=watch"))
}

/// `upstream`, a protobuf watch body of the resource `(group, version, resource)` or the
/// `Status` of a refused watch, as JSON.
pub struct ProtobufBody<B> {
    upstream: B,
    /// Whether it is one `Status`, read whole, rather than a watch's frames.
    status: bool,
    /// Which of [`KNOWN`] it is, if any.
    resource: Option<usize>,
    /// Bytes received and not yet a whole frame.
    pending: BytesMut,
    /// What stopped the transcoding, once the events before it are sent.
    failure: Option<TranscodeError>,
    ended: bool,
}

impl<B> ProtobufBody<B> {
    /// Turns `upstream`, a watch of `(group, version, resource)`, into JSON as it is read.
    pub fn watch(upstream: B, group: &str, version: &str, resource: &str) -> ProtobufBody<B> {
        ProtobufBody {
            upstream,
            status: false,
            resource: known(group, version, resource),
            pending: BytesMut::new(),
            failure: None,
            ended: false,
        }
    }

    /// Turns `upstream`, the `Status` of a refused request, into JSON once it is read.
    pub fn status(upstream: B) -> ProtobufBody<B> {
        ProtobufBody {
            status: true,
            resource: None,
            ..ProtobufBody::watch(upstream, "", "", "")
        }
    }

    /// The JSON events of the whole frames pending, if any; a failure after some is kept for
    /// the next call.
    fn events(&mut self) -> Result<Option<Bytes>, TranscodeError> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        let mut out = Vec::new();
        let failed = self.frames(&mut out);
        match failed {
            Err(failure) if !out.is_empty() => self.failure = Some(failure),
            Err(failure) => return Err(failure),
            Ok(()) => {}
        }
        Ok((!out.is_empty()).then(|| Bytes::from(out)))
    }

    fn frames(&mut self, out: &mut Vec<u8>) -> Result<(), TranscodeError> {
        if self.status {
            return match self.pending.len() {
                len if len > MAX_OBJECT => Err(TranscodeError::TooLarge(len)),
                _ => Ok(()),
            };
        }
        while self.pending.len() >= 4 {
            let len = u32::from_be_bytes([
                self.pending[0],
                self.pending[1],
                self.pending[2],
                self.pending[3],
            ]) as usize;
            if len > MAX_OBJECT {
                return Err(TranscodeError::TooLarge(len));
            }
            if self.pending.len() < 4 + len {
                self.pending.reserve(4 + len - self.pending.len());
                break;
            }
            self.pending.advance(4);
            let frame = self.pending.split_to(len);
            let written = out.len();
            event(out, &frame, self.resource.map(|i| &KNOWN[i])).inspect_err(|_| {
                out.truncate(written);
            })?;
        }
        Ok(())
    }

    fn failed(&mut self, error: TranscodeError) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.ended = true;
        if error.refuses_protobuf() {
            if let Some(index) = self.resource {
                let k = &KNOWN[index];
                if !REFUSED[index].swap(true, Ordering::Relaxed) {
                    tracing::warn!(group = k.group, version = k.version, resource = k.resource, %error, "an event the gateway cannot read in protobuf (a newer cluster's?): watching it as JSON from now on");
                }
            }
            // Its client watches again from its last version, as JSON.
            return Poll::Ready(None);
        }
        Poll::Ready(Some(Err(error.into())))
    }
}

/// Writes the JSON line of one frame, a `meta.v1.WatchEvent`, of a watch of `resource`.
fn event(out: &mut Vec<u8>, frame: &[u8], resource: Option<&Known>) -> Result<(), TranscodeError> {
    let frame = match frame.strip_prefix(MAGIC) {
        Some(unknown) => envelope(unknown)?.2,
        None => frame,
    };
    let (mut kind, mut object) = ("", None);
    for field in Fields::of(frame) {
        match field? {
            (1, v) => kind = json::utf8(json::bytes_of(v)?)?,
            (2, v) => {
                for inner in Fields::of(json::bytes_of(v)?) {
                    match inner? {
                        (1, raw) => object = Some(json::bytes_of(raw)?),
                        (tag, _) => {
                            return Err(TranscodeError::UnknownField {
                                message: "RawExtension",
                                tag,
                            });
                        }
                    }
                }
            }
            (tag, _) => {
                return Err(TranscodeError::UnknownField {
                    message: "WatchEvent",
                    tag,
                });
            }
        }
    }
    let object = object
        .and_then(|o| o.strip_prefix(MAGIC))
        .ok_or(TranscodeError::Malformed("an event without its object"))?;
    let (api_version, object_kind, message) = envelope(object)?;
    let schema = if object_kind == "Status" {
        &STATUS
    } else {
        resource
            .filter(|k| k.kind == object_kind && api_version_of(k).eq(api_version.split('/').rev()))
            .map(|k| k.message)
            .ok_or_else(|| TranscodeError::UnknownKind(format!("{api_version} {object_kind}")))?
    };
    out.extend_from_slice(b"{\"type\":");
    json::string(out, kind);
    out.extend_from_slice(b",\"object\":");
    json::object(out, object_kind, api_version, message, schema)?;
    out.extend_from_slice(b"}\n");
    Ok(())
}

/// Writes the JSON of `bytes`, a `Status` in protobuf.
fn status(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), TranscodeError> {
    let unknown = bytes
        .strip_prefix(MAGIC)
        .ok_or(TranscodeError::Malformed("an object without its prefix"))?;
    match envelope(unknown)? {
        (api_version, "Status", message) => {
            json::object(out, "Status", api_version, message, &STATUS)
        }
        (api_version, kind, _) => Err(TranscodeError::UnknownKind(format!("{api_version} {kind}"))),
    }
}

/// A known resource's `apiVersion`, its parts last first (`v1`, then the group if any).
fn api_version_of(known: &Known) -> impl Iterator<Item = &'static str> {
    std::iter::once(known.version).chain((!known.group.is_empty()).then_some(known.group))
}

/// A `runtime.Unknown`: the `apiVersion`, `kind` and message it holds.
fn envelope(bytes: &[u8]) -> Result<(&str, &str, &[u8]), TranscodeError> {
    let (mut api_version, mut kind, mut raw) = ("", "", &[][..]);
    for field in Fields::of(bytes) {
        match field? {
            (1, v) => {
                for meta in Fields::of(json::bytes_of(v)?) {
                    match meta? {
                        (1, v) => api_version = json::utf8(json::bytes_of(v)?)?,
                        (2, v) => kind = json::utf8(json::bytes_of(v)?)?,
                        (tag, _) => {
                            return Err(TranscodeError::UnknownField {
                                message: "TypeMeta",
                                tag,
                            });
                        }
                    }
                }
            }
            (2, v) => raw = json::bytes_of(v)?,
            (3, v) => {
                let encoding = json::utf8(json::bytes_of(v)?)?;
                if !encoding.is_empty() {
                    return Err(TranscodeError::Encoded(encoding.to_owned()));
                }
            }
            (4, v) => {
                json::bytes_of(v)?;
            }
            (tag, _) => {
                return Err(TranscodeError::UnknownField {
                    message: "Unknown",
                    tag,
                });
            }
        }
    }
    Ok((api_version, kind, raw))
}

impl<B> Body for ProtobufBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            match this.events() {
                Ok(Some(json)) => return Poll::Ready(Some(Ok(Frame::data(json)))),
                Ok(None) => {}
                Err(error) => return this.failed(error),
            }
            match ready!(Pin::new(&mut this.upstream).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.pending.extend_from_slice(&data),
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
                Some(Err(error)) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(error.into())));
                }
                None if this.status => {
                    this.ended = true;
                    let mut out = Vec::new();
                    return match status(&mut out, &this.pending) {
                        Ok(()) => Poll::Ready(Some(Ok(Frame::data(Bytes::from(out))))),
                        Err(error) => Poll::Ready(Some(Err(error.into()))),
                    };
                }
                None if this.pending.is_empty() => {
                    this.ended = true;
                    return Poll::Ready(None);
                }
                None => return this.failed(TranscodeError::CutShort),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }
}
