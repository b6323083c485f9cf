//! Building responses: the body type every response has, Kubernetes `Status` bodies, and
//! JSON bodies. Shared by the server and the local proxy.

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

use crate::error::BoxError;

/// The body of every response the gateway sends.
pub type ResponseBody = UnsyncBoxBody<Bytes, BoxError>;

/// A response with a whole body in memory (a Status, one object).
pub fn full(code: StatusCode, content_type: &'static str, body: Bytes) -> Response<ResponseBody> {
    let mut response = Response::new(
        Full::new(body)
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    response
}

/// A plain-text response.
pub fn text(code: StatusCode, body: String) -> Response<ResponseBody> {
    full(code, "text/plain; charset=utf-8", Bytes::from(body))
}

/// A JSON response.
pub fn json(code: StatusCode, body: Bytes) -> Response<ResponseBody> {
    full(code, "application/json", body)
}

/// A Kubernetes `Status` with `status: Failure`: the body of an error response, and the
/// object of a watch ERROR event.
pub fn failure_status(code: u16, reason: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

/// A Kubernetes `Status` response (`kind: Status`, `status: Failure`).
pub fn status_response(code: StatusCode, reason: &str, message: &str) -> Response<ResponseBody> {
    let body = failure_status(code.as_u16(), reason, message);
    json(code, Bytes::from(body.to_string()))
}

/// A watch's `ERROR` event for a resourceVersion too old to resume from (`410 Expired`, as
/// kube-apiserver sends it): the client re-lists.
pub fn expired_event(message: &str) -> Bytes {
    let object = failure_status(410, "Expired", message);
    let mut bytes = serde_json::json!({"type": "ERROR", "object": object})
        .to_string()
        .into_bytes();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_status_body_is_a_kubernetes_status() {
        let response = status_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "down",
        );
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["status"], "Failure");
        assert_eq!(status["code"], 503);
        assert_eq!(status["reason"], "ServiceUnavailable");
        assert_eq!(status["message"], "down");
    }
}
