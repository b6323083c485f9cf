//! Errors the gateway answers itself, and the one place they become a Kubernetes `Status`
//! response with its HTTP code and a metric label.

use http::{Method, Response, StatusCode};
use thiserror::Error;

use crate::metrics::{ErrorLabels, Metrics};
use crate::reply::{ResponseBody, status_response};
use crate::stream::ObjectError;
use crate::upstream::TransportError;

/// Why a request was answered by the gateway instead of an apiserver.
#[derive(Debug, Error)]
pub enum ProxyError {
    /// The request is malformed.
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// The method cannot be proxied.
    #[error("method {0} is not supported by the gateway")]
    MethodNotAllowed(Method),
    /// No apiserver is configured.
    #[error("no apiserver is configured")]
    NoServer,
    /// The apiserver was found unreachable while the request was in flight.
    #[error(
        "the apiserver {0} became unreachable while the request was in flight; it may or may not have been applied"
    )]
    Lost(String),
    /// The apiserver could not be reached or did not answer.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// A request on the HTTPS proxy with no credentials of its own: the gateway's are not
    /// lent there.
    #[error(
        "Unauthorized: the gateway's HTTPS proxy needs the caller's own credentials (a bearer token, or this node's client certificate)"
    )]
    Unauthenticated,
    /// A client certificate on the HTTPS proxy whose identity cannot be passed on.
    #[error(
        "the gateway's HTTPS proxy cannot pass on the identity of client certificate {0:?}: send a bearer token (a service account's) instead"
    )]
    CertificateNotPassedOn(String),
    /// A single object's answer could not be read, a filter failed on it, or hides it.
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// Offline, a token the gateway never saw the apiserver accept.
    #[error(
        "the apiserver is unreachable, and the gateway has not seen it accept this token, so nothing cached is served on it"
    )]
    UnknownToken,
}

/// Who is at fault for an error, as metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The client sent something wrong.
    Client,
    /// The apiserver is unreachable or misbehaved.
    Upstream,
    /// A filter failed.
    Filter,
}

impl Fault {
    fn as_str(self) -> &'static str {
        match self {
            Fault::Client => "client",
            Fault::Upstream => "upstream",
            Fault::Filter => "filter",
        }
    }
}

impl ProxyError {
    /// The HTTP code, the `Status` reason, who is at fault and the step that failed.
    fn classify(&self) -> (StatusCode, &'static str, Fault, &'static str) {
        match self {
            ProxyError::BadRequest(_) => (
                StatusCode::BAD_REQUEST,
                "BadRequest",
                Fault::Client,
                "bad_request",
            ),
            ProxyError::MethodNotAllowed(_) => (
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                Fault::Client,
                "method",
            ),
            ProxyError::NoServer => (
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                Fault::Upstream,
                "no_server",
            ),
            ProxyError::Lost(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                Fault::Upstream,
                "lost",
            ),
            ProxyError::Transport(TransportError::Connect { .. }) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                Fault::Upstream,
                "connect",
            ),
            ProxyError::Transport(TransportError::Exchange { .. }) => (
                StatusCode::BAD_GATEWAY,
                "ServiceUnavailable",
                Fault::Upstream,
                "exchange",
            ),
            ProxyError::Transport(TransportError::Timeout { .. }) => (
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                Fault::Upstream,
                "timeout",
            ),
            ProxyError::Unauthenticated => (
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                Fault::Client,
                "unauthenticated",
            ),
            ProxyError::CertificateNotPassedOn(_) => (
                StatusCode::FORBIDDEN,
                "Forbidden",
                Fault::Client,
                "certificate_not_passed_on",
            ),
            ProxyError::Object(ObjectError::Unreadable(_)) => (
                StatusCode::BAD_GATEWAY,
                "ServiceUnavailable",
                Fault::Upstream,
                "object_unreadable",
            ),
            ProxyError::Object(ObjectError::Filter(_)) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                Fault::Filter,
                "filter",
            ),
            ProxyError::Object(ObjectError::Hidden) => (
                StatusCode::NOT_FOUND,
                "NotFound",
                Fault::Client,
                "not_visible",
            ),
            // Counted, not logged as a warning: each offline retry of a pod would log one.
            ProxyError::UnknownToken => (
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                Fault::Client,
                "unknown_token",
            ),
        }
    }

    /// The `Status` response for this error, counted in `metrics`.
    pub fn into_response(self, metrics: &Metrics) -> Response<ResponseBody> {
        let (code, reason, fault, kind) = self.classify();
        metrics
            .errors
            .get_or_create(&ErrorLabels {
                fault: fault.as_str(),
                kind,
            })
            .inc();
        let message = crate::error::error_chain(&self);
        match fault {
            Fault::Client => tracing::debug!(error = %message, "rejected request"),
            Fault::Upstream => tracing::warn!(error = %message, "upstream failure"),
            Fault::Filter => tracing::warn!(error = %message, "filter failure"),
        }
        status_response(code, reason, &message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_counted_by_fault() {
        let metrics = Metrics::new();
        let response = ProxyError::BadRequest("path").into_response(&metrics);
        assert_eq!(response.status(), 400);
        assert!(
            metrics
                .encode()
                .contains(r#"edgegate_errors_total{fault="client",kind="bad_request"} 1"#)
        );
    }
}
