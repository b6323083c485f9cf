//! Why the feed's list or watch failed, and whether another try of a page may mend it.

use http::StatusCode;

use crate::node::multiplexer::object::ObjectError;
use crate::stream::FrameError;

/// Why one list or watch of the feed failed.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// The request could not be made or its body broke off.
    #[error("request failed: {0}")]
    Request(#[from] kube::Error),
    /// The body could not be read.
    #[error("body: {0}")]
    Body(String),
    /// The apiserver refused (other than `410 Expired`).
    #[error("answered {0}")]
    Status(StatusCode),
    /// The body is not what the apiserver sends.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// An object cannot be held.
    #[error(transparent)]
    Object(#[from] ObjectError),
}

/// Whether asking for a failed page again may mend it: the request or its body broke off
/// or stalled, the body ended short, or the apiserver (or the gateway before it) was
/// overloaded, timed out or away. Not an expired `continue` token (`410`), nor any other
/// refusal, nor an object that cannot be held.
pub(super) fn may_mend(error: &FeedError) -> bool {
    match error {
        FeedError::Request(_) | FeedError::Body(_) | FeedError::Frame(_) => true,
        FeedError::Status(status) => {
            status.is_server_error() || *status == StatusCode::TOO_MANY_REQUESTS
        }
        FeedError::Object(_) => false,
    }
}
