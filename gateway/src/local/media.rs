//! A local write's body: the media type its `Content-Type` names, read as kube-apiserver
//! reads it, and the body itself, whole and bounded.

use bytes::Bytes;
use http::HeaderMap;
use http::header::CONTENT_TYPE;
use http_body_util::{BodyExt, Limited};

pub(super) use crate::stream::PROTOBUF;

/// The largest body a local write may carry: Kubernetes objects are at most 1.5 MiB in etcd,
/// a little more as JSON.
const MAX_BODY: usize = 3 << 20;

/// The media type of a `Content-Type` value, lowercase, without its parameters.
pub(super) fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The `Content-Type` of a request, JSON when it names none (as kube-apiserver reads it).
pub(super) fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("application/json")
}

/// Whether a request's body is in Kubernetes' protobuf.
pub(super) fn is_protobuf(headers: &HeaderMap) -> bool {
    media_type(content_type(headers)) == PROTOBUF
}

/// `body`, whole; `None` beyond [`MAX_BODY`] (before more is read) or when it breaks off.
pub(super) async fn whole<B>(body: B) -> Option<Bytes>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<crate::error::BoxError>,
{
    let collected = Limited::new(body, MAX_BODY).collect().await.ok()?;
    Some(collected.to_bytes())
}
