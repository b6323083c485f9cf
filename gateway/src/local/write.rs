//! Offline writes: creates are echoed (events and leases keep flowing into nowhere rather
//! than failing), lease renewals echoed, everything else answered from the cache.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use super::Ask;
use crate::reply::{ResponseBody, json, status_response};

/// The largest body an offline write may carry: Kubernetes objects are at most 1.5 MiB in
/// etcd, a little more as JSON.
const MAX_BODY: usize = 3 << 20;

/// Echoes a create with 201; `serviceaccounts/token` cannot be faked usefully and is refused.
pub(super) async fn create(ask: &Ask<'_>, request: Request<Incoming>) -> Response<ResponseBody> {
    if !ask.info.subresource.is_empty() {
        return status_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            &format!(
                "the cloud is unreachable: {} cannot be created offline",
                ask.info.subresource
            ),
        );
    }
    echo(request, StatusCode::CREATED).await
}

/// Answers with the request's own JSON object.
pub(super) async fn echo(request: Request<Incoming>, code: StatusCode) -> Response<ResponseBody> {
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return status_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                "the request body is too large or broke off",
            );
        }
    };
    if !is_object(&body) {
        return status_response(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "the request body is not a JSON object",
        );
    }
    json(code, body)
}

fn is_object(body: &Bytes) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
        && body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}
