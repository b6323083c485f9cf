//! The proxy's errors: why a request was answered by the gateway instead of an apiserver,
//! each with its HTTP code, `Status` reason, fault and metric label.

use http::{Method, Response, StatusCode};
use thiserror::Error;

use super::protobuf_reply::ProtobufReplyError;
use crate::local::LocalError;
use crate::metrics::Metrics;
use crate::refusal::{Fault, Refusal, RefusalStatus, refuse};
use crate::reply::ResponseBody;
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
    /// On the pool port, a client that is no node of this node's pool.
    #[error("{}", match .0 {
        Some(node) => format!("node {node:?} is not of this node's pool: only its pool's nodes feed from this gateway"),
        None => "the pool port serves node client certificates only (system:node:<name>, group system:nodes)".to_owned(),
    })]
    NotOfThePool(Option<String>),
    /// On the pool port, a request other than a list or watch of a pool-scope resource.
    #[error("the pool port answers only lists and watches of the pool-scope resources")]
    NotPoolScope,
    /// A single object's answer could not be read, a filter failed on it, or hides it.
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// Offline, the cache cannot answer.
    #[error(transparent)]
    Local(#[from] LocalError),
    /// Offline, a token the gateway never saw the apiserver accept.
    #[error(
        "the apiserver is unreachable, and the gateway has not seen it accept this token, so nothing cached is served on it"
    )]
    UnknownToken,
    /// An answer that could not be written in protobuf for a client that takes only that.
    #[error(transparent)]
    Protobuf(#[from] ProtobufReplyError),
}

impl Refusal for ProxyError {
    fn refusal_status(&self) -> RefusalStatus {
        let (code, reason, fault, kind) = match self {
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
            ProxyError::NotOfThePool(_) => (
                StatusCode::FORBIDDEN,
                "Forbidden",
                Fault::Client,
                "not_of_the_pool",
            ),
            ProxyError::NotPoolScope => (
                StatusCode::FORBIDDEN,
                "Forbidden",
                Fault::Client,
                "not_pool_scope",
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
            ProxyError::UnknownToken => (
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                Fault::Client,
                "unknown_token",
            ),
            ProxyError::Protobuf(ProtobufReplyError::NotAcceptable(_)) => (
                StatusCode::NOT_ACCEPTABLE,
                "NotAcceptable",
                Fault::Client,
                "not_acceptable",
            ),
            ProxyError::Protobuf(ProtobufReplyError::Unreadable(_)) => (
                StatusCode::BAD_GATEWAY,
                "ServiceUnavailable",
                Fault::Upstream,
                "object_unreadable",
            ),
            ProxyError::Protobuf(ProtobufReplyError::Spool(_)) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                Fault::Gateway,
                "spool",
            ),
            ProxyError::Local(error) => return error.refusal_status(),
        };
        RefusalStatus {
            code,
            reason,
            fault,
            kind,
        }
    }

    fn status_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        match self {
            ProxyError::Local(error) => error.status_fields(),
            _ => serde_json::Map::new(),
        }
    }
}

impl ProxyError {
    /// The `Status` response for this error, counted in `metrics`.
    pub fn into_response(self, metrics: &Metrics) -> Response<ResponseBody> {
        refuse(&self, metrics)
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
