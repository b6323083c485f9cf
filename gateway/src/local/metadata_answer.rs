//! Offline answers to a client that takes objects' metadata alone (client-go's metadata
//! client, a garbage collector's informers): the cache's JSON answer reshaped into
//! `PartialObjectMetadata` as it streams, as kube-apiserver would answer.

use http::Response;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http_body_util::{BodyExt, BodyStream, Full, StreamBody};

use super::error::LocalError;
use crate::reply::ResponseBody;
use crate::request::Verb;
use crate::stream::partial_metadata;

/// `answer`, the cache's JSON answer to a `verb`, with its objects as `PartialObjectMetadata`.
pub(super) async fn reshaped(
    verb: Verb,
    answer: Response<ResponseBody>,
) -> Result<Response<ResponseBody>, LocalError> {
    let (mut parts, body) = answer.into_parts();
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let body = match verb {
        Verb::List => {
            parts.headers.remove(CONTENT_LENGTH);
            StreamBody::new(partial_metadata::list(BodyStream::new(body))).boxed_unsync()
        }
        Verb::Watch => {
            StreamBody::new(partial_metadata::watch(BodyStream::new(body))).boxed_unsync()
        }
        _ => {
            // One object the cache read whole: already in memory.
            let object = body
                .collect()
                .await
                .map_err(|e| LocalError::Unanswerable(format!("the cached object: {e}")))?
                .to_bytes();
            let partial = partial_metadata::object(&object)
                .map_err(|e| LocalError::Unanswerable(format!("the cached object: {e}")))?;
            parts.headers.insert(CONTENT_LENGTH, partial.len().into());
            Full::new(partial)
                .map_err(|never| match never {})
                .boxed_unsync()
        }
    };
    Ok(Response::from_parts(parts, body))
}
