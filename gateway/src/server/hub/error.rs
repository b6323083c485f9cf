//! The hub's refusals, answered as Kubernetes `Status` through [`crate::refusal::refuse`]
//! like every other answer the gateway makes itself.

use http::StatusCode;

use crate::refusal::{Fault, Refusal, RefusalStatus};

/// A hub request the hub does not answer as asked.
#[derive(Debug, thiserror::Error)]
pub(super) enum HubError {
    /// A caller off loopback asked for an endpoint only loopback may ask for.
    #[error("{0} answers only callers on loopback (127.0.0.0/8, ::1)")]
    OffLoopback(String),
    /// The method is not one the endpoint takes.
    #[error("{0}")]
    MethodNotAllowed(&'static str),
    /// No endpoint at this path.
    #[error("no such hub endpoint")]
    NoSuchEndpoint,
    /// The request's query or body cannot be read.
    #[error("{0}")]
    BadRequest(String),
    /// The cache holds no such object.
    #[error("{0}")]
    NotCached(String),
    /// The gateway failed to answer.
    #[error("{0}")]
    Internal(String),
}

impl Refusal for HubError {
    fn refusal_status(&self) -> RefusalStatus {
        let (code, reason, fault, kind) = match self {
            HubError::OffLoopback(_) => (
                StatusCode::FORBIDDEN,
                "Forbidden",
                Fault::Client,
                "hub_off_loopback",
            ),
            HubError::MethodNotAllowed(_) => (
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                Fault::Client,
                "method",
            ),
            HubError::NoSuchEndpoint => (
                StatusCode::NOT_FOUND,
                "NotFound",
                Fault::Client,
                "hub_endpoint",
            ),
            HubError::BadRequest(_) => (
                StatusCode::BAD_REQUEST,
                "BadRequest",
                Fault::Client,
                "bad_request",
            ),
            HubError::NotCached(_) => (
                StatusCode::NOT_FOUND,
                "NotFound",
                Fault::Client,
                "not_cached",
            ),
            HubError::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                Fault::Gateway,
                "hub",
            ),
        };
        RefusalStatus {
            code,
            reason,
            fault,
            kind,
        }
    }
}
