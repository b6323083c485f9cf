//! Offline lists, streamed from the store by a blocking reader into the
//! response in chunks: a 10 000-object list is never gathered.

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::{mpsc, oneshot};

use super::Local;
use super::continue_token::ContinueToken;
use super::error::LocalError;
use super::paging::ListRead;
use super::protobuf_answer::{PROTOBUF, items_length, not_acceptable, produce_list};
use crate::cache::{self, Page, PageSpec, ReadError, SetMeta};
use crate::error::BoxError;
use crate::reply::ResponseBody;
use crate::request::{Answered, RequestContext};
use crate::stream::{ListEncoder, ListMeta};

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
    /// The list asked for a version newer than the cache holds (the newest, given).
    TooLarge(u64),
    /// The list cannot be written as the client takes it.
    Refused(LocalError),
}

impl Local {
    /// Answers a list from the cache.
    pub(super) async fn list(
        &self,
        context: &RequestContext,
    ) -> Result<http::Response<ResponseBody>, LocalError> {
        let read = ListRead::of(&context.query)?;
        let refuse_empty = context.cache_component == "kubelet"
            && context.info.resource == "pods"
            && context.info.api_group.is_empty()
            && read.from.is_none();
        let asked = read.not_older_than.or(read.exact_at);
        let continued = read
            .continued
            .as_ref()
            .map(|token| token.at_newest().encode());
        let protobuf = context.answered == Answered::Protobuf;
        let (found, chunks) = self.stream_from_store(context, read, refuse_empty);
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
                let media = if protobuf { PROTOBUF } else { "application/json" };
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static(media),
                );
                Ok(response)
            }
            Ok(Ok(Found::Refused(refusal))) => Err(refusal),
            Ok(Ok(Found::NoPods)) => Err(LocalError::NotCached(
                "no pods are cached for this node: refusing an empty list so kubelet keeps its pods"
                    .to_owned(),
            )),
            Ok(Ok(Found::TooLarge(current))) => Err(LocalError::TooLargeVersion {
                asked: asked.unwrap_or_default(),
                current,
            }),
            Ok(Err(ReadError::Changed { .. })) => Err(match continued {
                Some(retry) => LocalError::ContinueExpired { retry },
                None => LocalError::Expired(
                    "The resourceVersion for the provided list is too old.".to_owned(),
                ),
            }),
            Ok(Err(error)) => Err(self.read_failed(&error)),
            Err(_) => Err(LocalError::store(&std::io::Error::other(
                "the cache reader stopped",
            ))),
        }
    }

    /// Starts a blocking reader of the list that `context` wants, as `read` says: it reports
    /// what it found, then streams the body's chunks.
    fn stream_from_store(
        &self,
        context: &RequestContext,
        read: ListRead,
        refuse_empty: bool,
    ) -> Reader {
        let (found_tx, found_rx) = oneshot::channel();
        let (chunks_tx, chunks_rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
        let store = self.cache.store().clone();
        let resource = super::resource_of(context);
        let scope = super::ReadScope::of(context);
        let local_version = self.cache.last_local_version();
        let protobuf = context.answered == Answered::Protobuf;
        tokio::task::spawn_blocking(move || {
            let scope = scope.scope();
            let selected = !scope.labels.is_empty() || !scope.fields.is_empty();
            let Page {
                meta,
                items,
                last,
                remaining,
            } = match read_page(store.as_ref(), &resource, scope, &read) {
                Ok(page) => page,
                Err(error) => {
                    let _ = found_tx.send(Err(error));
                    return;
                }
            };
            let held = meta.resource_version.parse::<u64>().unwrap_or(0);
            let current = held.max(local_version);
            if let Some(asked) = read.not_older_than.or(read.exact_at)
                && asked > current
            {
                let _ = found_tx.send(Ok(Found::TooLarge(current)));
                return;
            }
            let mut items = items.peekable();
            if refuse_empty && items.peek().is_none() {
                let _ = found_tx.send(Ok(Found::NoPods));
                return;
            }
            let version = read
                .exact_at
                .map_or_else(|| meta.resource_version.clone(), |at| at.to_string());
            let more = last.and_then(|last| {
                let at = i64::try_from(version.parse::<u64>().ok()?).ok()?;
                Some(More {
                    token: ContinueToken::after(&last, at).encode(),
                    remaining: (!selected).then_some(remaining),
                })
            });
            if !protobuf {
                if found_tx.send(Ok(Found::Listing)).is_ok() {
                    produce(list_head(&meta, &version, more.as_ref()), items, &chunks_tx);
                }
                return;
            }
            // Protobuf declares the items' length first: one pass to sum it, one to stream.
            let encoder = match ListEncoder::new(&meta.api_version, &meta.list_kind) {
                Ok(encoder) => encoder,
                Err(error) => {
                    let _ = found_tx.send(Ok(Found::Refused(not_acceptable(&error))));
                    return;
                }
            };
            let length = match items_length(&encoder, Box::new(items)) {
                Ok(length) => length,
                Err(refusal) => {
                    let _ = found_tx.send(Ok(Found::Refused(refusal)));
                    return;
                }
            };
            let again = match read_page(store.as_ref(), &resource, scope, &read) {
                Ok(page) => page.items,
                Err(error) => {
                    let _ = found_tx.send(Err(error));
                    return;
                }
            };
            if found_tx.send(Ok(Found::Listing)).is_ok() {
                let head = ListMeta {
                    resource_version: &version,
                    continue_token: more.as_ref().map(|m| m.token.as_str()),
                    remaining: more.as_ref().and_then(|m| m.remaining),
                };
                produce_list(&encoder, &head, (length, CHUNK), again, &chunks_tx);
            }
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
            ReadError::Expired { .. } | ReadError::Changed { .. } => {
                LocalError::Expired(error.to_string())
            }
            ReadError::Store(error) => LocalError::store(error),
        }
    }
}

/// The page `read` asks for of `resource` in `scope`: the set as it is when nothing pages
/// it, else as [`cache::page`] reads it.
fn read_page(
    store: &dyn cache::Store,
    resource: &cache::ResourceKey,
    scope: cache::Scope<'_>,
    read: &ListRead,
) -> Result<Page, ReadError> {
    let spec = PageSpec {
        from: read.from.as_deref(),
        limit: read
            .limit
            .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX)),
        exact_at: read.exact_at,
    };
    if spec.from.is_some() || spec.exact_at.is_some() || read.limit.is_some() {
        return cache::page(store, resource, scope, spec);
    }
    cache::list(store, resource, scope).map(|listing| Page {
        meta: listing.meta,
        items: listing.items,
        last: None,
        remaining: 0,
    })
}

/// Where a page's list goes on.
struct More {
    /// The continue token of the next page.
    token: String,
    /// How many items follow the page; `None` for a selected list, as kube-apiserver leaves
    /// it out there.
    remaining: Option<u64>,
}

/// The head of a cached list at `version`: everything up to its items.
fn list_head(meta: &SetMeta, version: &str, more: Option<&More>) -> Bytes {
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
    let mut metadata = format!(r#""resourceVersion":{}"#, text(version));
    if let Some(more) = more {
        metadata.push_str(&format!(r#","continue":{}"#, text(&more.token)));
        if let Some(remaining) = more.remaining {
            metadata.push_str(&format!(r#","remainingItemCount":{remaining}"#));
        }
    }
    Bytes::from(format!(
        r#"{{"kind":{},"apiVersion":{},"metadata":{{{metadata}}},"items":["#,
        text(kind),
        text(api_version),
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
