//! Offline answers to a client that takes Kubernetes' protobuf and not JSON, written from
//! the cached JSON by the schema of Kubernetes' `.proto` files: an object, a list (its
//! items' lengths summed in a first pass over the store, so the list streams in a second),
//! and watch events as kube-apiserver frames them. A kind outside the schema is `406`, as
//! kube-apiserver answers a protobuf request for a kind it cannot write so.

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::error::LocalError;
use crate::cache::{ResourceKey, SetKey, Store, StoreError};
use crate::error::BoxError;
use crate::reply::ResponseBody;
use crate::stream::{
    Event, ListEncoder, ListMeta, TranscodeError, json_object_protobuf_as, watch_frame,
};
pub(super) use crate::stream::{PROTOBUF, PROTOBUF_WATCH};

/// The `apiVersion` and `kind` of a resource's objects, which the cache keeps with its sets
/// (a list's items are stored without them).
#[derive(Clone, Debug, Default)]
pub(super) struct TypeNames {
    /// `apiVersion`.
    pub api_version: String,
    /// The object's `kind`.
    pub kind: String,
}

impl TypeNames {
    /// The names of `resource`'s objects, from any of its cached sets.
    pub fn of(store: &dyn Store, resource: &ResourceKey) -> Option<TypeNames> {
        let sets = store.sets(&SetKey::resource_prefix(resource)).ok()?;
        sets.into_iter().find_map(|(_, meta)| {
            let kind = meta.list_kind.strip_suffix("List")?;
            (!kind.is_empty()).then(|| TypeNames {
                api_version: meta.api_version.clone(),
                kind: kind.to_owned(),
            })
        })
    }

    /// `object` (cached JSON) in protobuf, its own `apiVersion` and `kind` first.
    pub fn encode(&self, object: &[u8]) -> Result<Vec<u8>, TranscodeError> {
        let json: serde_json::Value =
            serde_json::from_slice(object).map_err(|_| TranscodeError::NotJson)?;
        let own = |name: &str| json.get(name).and_then(|v| v.as_str()).map(str::to_owned);
        let api_version = own("apiVersion").unwrap_or_else(|| self.api_version.clone());
        let kind = own("kind").unwrap_or_else(|| self.kind.clone());
        json_object_protobuf_as(&json, &api_version, &kind)
    }
}

/// Why an object cannot be written in protobuf, as the client is told.
pub(super) fn not_acceptable(error: &TranscodeError) -> LocalError {
    LocalError::NotAcceptable(format!(
        "the server was unable to respond with a content type that the client supports: {error}"
    ))
}

/// The answer to a get: `object` in protobuf.
pub(super) fn object_answer(
    object: &[u8],
    names: &TypeNames,
) -> Result<Response<ResponseBody>, LocalError> {
    let body = names.encode(object).map_err(|e| not_acceptable(&e))?;
    let body = Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(PROTOBUF),
    );
    Ok(response)
}

/// A watch event in protobuf, framed.
pub(super) fn event_frame(event: &Event, names: &TypeNames) -> Result<Vec<u8>, TranscodeError> {
    let object = names.encode(&event.object)?;
    Ok(watch_frame(event.kind.as_str(), &object))
}

/// A list's items, as each pass over the store reads them.
pub(super) type Items = Box<dyn Iterator<Item = Result<Bytes, StoreError>> + Send>;

/// The first pass over a list: the length of its items' fields, or why one cannot be
/// written.
pub(super) fn items_length(encoder: &ListEncoder, items: Items) -> Result<usize, LocalError> {
    let mut length = 0;
    for item in items {
        let item = item.map_err(|e| LocalError::store(&e))?;
        let json: serde_json::Value =
            serde_json::from_slice(&item).map_err(|_| not_acceptable(&TranscodeError::NotJson))?;
        length += encoder.item(&json).map_err(|e| not_acceptable(&e))?.len();
    }
    Ok(length)
}

/// The second pass: the list written in chunks of `chunk_size`, its head declaring `length`; an item
/// that changed length since the first pass breaks the stream off rather than send a list
/// that lies.
pub(super) fn produce_list(
    encoder: &ListEncoder,
    meta: &ListMeta<'_>,
    (length, chunk_size): (usize, usize),
    items: Items,
    tx: &tokio::sync::mpsc::Sender<Result<Bytes, BoxError>>,
) {
    let mut chunk = BytesMut::with_capacity(chunk_size + 4096);
    chunk.extend_from_slice(&encoder.head(meta, length));
    let mut written = 0;
    for item in items {
        let field = item
            .map_err(BoxError::from)
            .and_then(|item| {
                let json: serde_json::Value = serde_json::from_slice(&item)?;
                Ok(encoder.item(&json)?)
            })
            .and_then(|field| {
                written += field.len();
                if written > length {
                    return Err(BoxError::from("the list changed while it was written"));
                }
                Ok(field)
            });
        match field {
            Ok(field) => chunk.extend_from_slice(&field),
            Err(error) => {
                let _ = tx.blocking_send(Err(error));
                return;
            }
        }
        if chunk.len() >= chunk_size && tx.blocking_send(Ok(chunk.split().freeze())).is_err() {
            return;
        }
    }
    if written != length {
        let _ = tx.blocking_send(Err(BoxError::from("the list changed while it was written")));
        return;
    }
    chunk.extend_from_slice(encoder.tail());
    let _ = tx.blocking_send(Ok(chunk.freeze()));
}
