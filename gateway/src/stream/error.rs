//! How a response body can be wrong or break off.

use thiserror::Error;

/// The largest single object read whole to filter or cache it, and the most a list or watch
/// framer holds of one item, event, list head or tail: far above etcd's 1.5 MiB object
/// limit, low enough that a hostile upstream cannot exhaust memory.
pub const MAX_OBJECT: usize = 16 << 20;

/// A body that is not the JSON it claims to be.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The body ended inside a value.
    #[error("the body ended inside a JSON value")]
    Truncated,
    /// The body's structure is not JSON.
    #[error("the body is not well-formed JSON")]
    Malformed,
    /// A list item is not a JSON object.
    #[error("a list item is not a JSON object")]
    NonObjectItem,
    /// A watch event lacks a known type or an object.
    #[error(
        "a watch event is not {{\"type\": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, \"object\": {{…}}}}"
    )]
    BadEvent,
    /// An object's metadata cannot be read.
    #[error("an object's metadata cannot be read")]
    BadObject,
    /// A list item, a watch event or a list's head or tail grew past
    /// [`MAX_OBJECT`] before it ended.
    #[error("an object is larger than 16 MiB")]
    TooLarge,
}

/// Why a response stream broke off.
#[derive(Debug, Error)]
pub enum StreamError {
    /// The upstream body failed.
    #[error("the upstream body failed")]
    Upstream(#[source] crate::error::BoxError),
    /// The transform gave a different number of verdicts than it was given objects.
    #[error("the filter chain returned the wrong number of verdicts")]
    VerdictCount,
}
