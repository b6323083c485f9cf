//! Why the local proxy cannot answer a request from the cache.

use http::StatusCode;
use thiserror::Error;

use crate::cache::LocalWriteError;
use crate::refusal::{Fault, Refusal, RefusalStatus};

/// Why an offline request is refused.
#[derive(Debug, Error)]
pub enum LocalError {
    /// Nothing cached answers it (a 404, as the apiserver would say of a missing object).
    #[error("{0}")]
    NotCached(String),
    /// It cannot be answered from the cache at all.
    #[error("the cloud is unreachable and {0}")]
    Unanswerable(String),
    /// A subresource cannot be created offline.
    #[error("the cloud is unreachable: {0} cannot be created offline")]
    SubresourceCreate(String),
    /// Deletes wait for the cloud.
    #[error("the cloud is unreachable: deletes are refused until it is back")]
    Delete,
    /// The request's selectors cannot be read.
    #[error("{0}")]
    BadSelector(String),
    /// The client's resourceVersion is older than what the cache holds.
    #[error("{0}")]
    Expired(String),
    /// A list's options are malformed (a continue token, with a resourceVersion).
    #[error("{0}")]
    BadListOptions(String),
    /// A list's options contradict each other, in kube-apiserver's validation's words.
    #[error("ListOptions.meta.k8s.io \"\" is invalid: {0}")]
    InvalidListOptions(String),
    /// A continue token's page can no longer be read at its version; `retry` goes on from
    /// the same key at the newest (an inconsistent list).
    #[error(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    )]
    ContinueExpired {
        /// The continue token that goes on at the newest version.
        retry: String,
    },
    /// The answer cannot be written in a media type the client takes.
    #[error("{0}")]
    NotAcceptable(String),
    /// A list asked for a resourceVersion newer than the cache holds.
    #[error("Timeout: Too large resource version: {asked}, current: {current}")]
    TooLargeVersion {
        /// The version asked for.
        asked: u64,
        /// The newest the cache holds.
        current: u64,
    },
    /// A write's body is in a media type the gateway cannot echo.
    #[error(
        "the cloud is unreachable and a {0:?} body cannot be answered offline (application/json and application/vnd.kubernetes.protobuf can)"
    )]
    Media(String),
    /// A write's body is too large or broke off.
    #[error("the request body is too large or broke off")]
    TooLarge,
    /// A write's body is not an object of its media type.
    #[error("the request body is not a {0} object")]
    NotAnObject(&'static str),
    /// The cache failed.
    #[error("the local cache failed: {0}")]
    Store(String),
    /// The node's own writes fill what the local layer may hold.
    #[error("the cloud is unreachable and {0}: this write waits for the cloud")]
    Full(String),
    /// A write of the node's own objects cannot be applied as its patch or body says.
    #[error(transparent)]
    Patch(#[from] super::patch::PatchError),
    /// A write's precondition fails (its uid, the version it was read at).
    #[error("{0}")]
    Conflict(String),
    /// A write would make an object kube-apiserver refuses.
    #[error("{0}")]
    Invalid(String),
}

impl Refusal for LocalError {
    fn refusal_status(&self) -> RefusalStatus {
        let (code, reason, fault, kind) = match self {
            LocalError::NotCached(_) => (
                StatusCode::NOT_FOUND,
                "NotFound",
                Fault::Offline,
                "not_cached",
            ),
            LocalError::Unanswerable(_)
            | LocalError::SubresourceCreate(_)
            | LocalError::Full(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                Fault::Offline,
                "unanswerable",
            ),
            LocalError::Delete => (
                StatusCode::FORBIDDEN,
                "Forbidden",
                Fault::Offline,
                "offline_delete",
            ),
            LocalError::BadSelector(_) => (
                StatusCode::BAD_REQUEST,
                "BadRequest",
                Fault::Client,
                "bad_selector",
            ),
            LocalError::Expired(_) | LocalError::ContinueExpired { .. } => {
                (StatusCode::GONE, "Expired", Fault::Client, "expired")
            }
            LocalError::BadListOptions(_) => (
                StatusCode::BAD_REQUEST,
                "BadRequest",
                Fault::Client,
                "bad_list_options",
            ),
            LocalError::InvalidListOptions(_) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                Fault::Client,
                "invalid",
            ),
            LocalError::NotAcceptable(_) => (
                StatusCode::NOT_ACCEPTABLE,
                "NotAcceptable",
                Fault::Client,
                "not_acceptable",
            ),
            LocalError::TooLargeVersion { .. } => (
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                Fault::Offline,
                "too_large_version",
            ),
            LocalError::Media(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UnsupportedMediaType",
                Fault::Client,
                "media_type",
            ),
            LocalError::TooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                Fault::Client,
                "too_large",
            ),
            LocalError::NotAnObject(_) => (
                StatusCode::BAD_REQUEST,
                "BadRequest",
                Fault::Client,
                "bad_body",
            ),
            LocalError::Patch(super::patch::PatchError::Media(_)) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UnsupportedMediaType",
                Fault::Client,
                "media_type",
            ),
            LocalError::Patch(super::patch::PatchError::Body(_)) => (
                StatusCode::BAD_REQUEST,
                "BadRequest",
                Fault::Client,
                "bad_body",
            ),
            LocalError::Patch(super::patch::PatchError::Apply(_)) | LocalError::Invalid(_) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                Fault::Client,
                "invalid",
            ),
            LocalError::Conflict(_) => {
                (StatusCode::CONFLICT, "Conflict", Fault::Client, "conflict")
            }
            LocalError::Store(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                Fault::Gateway,
                "cache",
            ),
        };
        RefusalStatus {
            code,
            reason,
            fault,
            kind,
        }
    }

    fn status_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        let fields = match self {
            LocalError::ContinueExpired { retry } => {
                serde_json::json!({"metadata": {"continue": retry}})
            }
            LocalError::TooLargeVersion { .. } => serde_json::json!({"details": {
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            }}),
            _ => return serde_json::Map::new(),
        };
        match fields {
            serde_json::Value::Object(fields) => fields,
            _ => serde_json::Map::new(),
        }
    }
}

impl LocalError {
    /// The cache failed with `error`.
    pub fn store(error: &dyn std::error::Error) -> LocalError {
        LocalError::Store(crate::error::error_chain(error))
    }
}

impl From<LocalWriteError> for LocalError {
    fn from(error: LocalWriteError) -> LocalError {
        match error {
            full @ LocalWriteError::Full { .. } => LocalError::Full(full.to_string()),
            LocalWriteError::Store(error) => LocalError::Store(error),
        }
    }
}
