//! Offline lists, streamed from the store by a blocking reader into the
//! response in chunks: a 10 000-object list is never gathered.

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::{mpsc, oneshot};

use super::Local;
use super::error::LocalError;
use crate::cache::{self, Listing, ReadError, SetMeta};
use crate::error::BoxError;
use crate::reply::ResponseBody;
use crate::request::RequestContext;

/// Bytes gathered before a chunk is sent: large enough for few syscalls, small enough to
/// keep memory flat.
pub(super) const CHUNK: usize = 64 << 10;
/// Chunks in flight between the store reader and the client.
pub(super) const CHUNKS_IN_FLIGHT: usize = 4;

/// What the reader reports before it streams, and the chunks it streams.
type Reader = (
    oneshot::Receiver<Result<Found, ReadError>>,
    mpsc::Receiver<Result<Bytes, BoxError>>,
);

/// What the reader found before it streams.
pub(super) enum Found {
    /// A list to stream.
    Listing,
    /// kubelet's pod list came back empty.
    NoPods,
}

impl Local {
    /// Answers a list from the cache.
    pub(super) async fn list(
        &self,
        context: &RequestContext,
    ) -> Result<http::Response<ResponseBody>, LocalError> {
        let refuse_empty = context.cache_component == "kubelet"
            && context.info.resource == "pods"
            && context.info.api_group.is_empty();
        let (found, chunks) = self.stream_from_store(context, refuse_empty);
        match found.await {
            Ok(Ok(Found::Listing)) => {
                self.cache.metrics().hits.inc();
                let body =
                    StreamBody::new(futures_util::stream::unfold(chunks, |mut rx| async move {
                        rx.recv()
                            .await
                            .map(|chunk| (chunk.map(http_body::Frame::data), rx))
                    }));
                let mut response = http::Response::new(body.boxed_unsync());
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                Ok(response)
            }
            Ok(Ok(Found::NoPods)) => Err(LocalError::NotCached(
                "no pods are cached for this node: refusing an empty list so kubelet keeps its pods"
                    .to_owned(),
            )),
            Ok(Err(error)) => Err(self.read_failed(&error)),
            Err(_) => Err(LocalError::store(&std::io::Error::other(
                "the cache reader stopped",
            ))),
        }
    }

    /// Starts a blocking reader of the list that `context` wants: it reports what it found,
    /// then streams the body's chunks.
    fn stream_from_store(&self, context: &RequestContext, refuse_empty: bool) -> Reader {
        let (found_tx, found_rx) = oneshot::channel();
        let (chunks_tx, chunks_rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
        let store = self.cache.store().clone();
        let resource = super::resource_of(context);
        let scope = super::ReadScope::of(context);
        tokio::task::spawn_blocking(move || {
            let listing = cache::list(store.as_ref(), &resource, scope.scope());
            let Listing { meta, items, .. } = match listing {
                Ok(listing) => listing,
                Err(error) => {
                    let _ = found_tx.send(Err(error));
                    return;
                }
            };
            let mut items = items.peekable();
            if refuse_empty && items.peek().is_none() {
                let _ = found_tx.send(Ok(Found::NoPods));
                return;
            }
            if found_tx.send(Ok(Found::Listing)).is_err() {
                return;
            }
            produce(list_head(&meta), items, &chunks_tx);
        });
        (found_rx, chunks_rx)
    }

    /// Why a read of the cache answers nothing.
    pub(super) fn read_failed(&self, error: &ReadError) -> LocalError {
        match error {
            ReadError::NotCached => {
                self.cache.metrics().misses.inc();
                LocalError::NotCached("nothing covering this list is in the local cache".to_owned())
            }
            ReadError::Selector(error) => LocalError::BadSelector(error.to_string()),
            ReadError::Expired { .. } => LocalError::Expired(error.to_string()),
            ReadError::Store(error) => LocalError::store(error),
        }
    }
}

/// The head of a cached list: everything up to its items.
fn list_head(meta: &SetMeta) -> Bytes {
    let text = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let kind = if meta.list_kind.is_empty() {
        "List"
    } else {
        &meta.list_kind
    };
    let api_version = if meta.api_version.is_empty() {
        "v1"
    } else {
        &meta.api_version
    };
    Bytes::from(format!(
        r#"{{"kind":{},"apiVersion":{},"metadata":{{"resourceVersion":{}}},"items":["#,
        text(kind),
        text(api_version),
        text(&meta.resource_version)
    ))
}

/// Writes the items as list items (comma-separated, closed by `]}`), chunk by chunk,
/// stopping if the client went away.
fn produce(
    head: Bytes,
    items: impl Iterator<Item = Result<Bytes, cache::StoreError>>,
    tx: &mpsc::Sender<Result<Bytes, BoxError>>,
) {
    let mut chunk = BytesMut::with_capacity(CHUNK + 4096);
    chunk.extend_from_slice(&head);
    let mut first = true;
    for item in items {
        let object = match item {
            Ok(object) => object,
            Err(error) => {
                let _ = tx.blocking_send(Err(Box::new(error)));
                return;
            }
        };
        if !first {
            chunk.extend_from_slice(b",");
        }
        chunk.extend_from_slice(&object);
        first = false;
        if chunk.len() >= CHUNK && tx.blocking_send(Ok(chunk.split().freeze())).is_err() {
            return;
        }
    }
    chunk.extend_from_slice(b"]}");
    let _ = tx.blocking_send(Ok(chunk.freeze()));
}
