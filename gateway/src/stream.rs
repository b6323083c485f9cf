//! Responses as streams of objects: the framing of list and watch bodies as bytes arrive, the
//! hook the filter chain implements, the watch visibility rule, and the tee to the cache.
//!
//! Nothing here holds a whole list: memory is bounded by the largest single object.

mod list;
mod nesting;
mod object;
mod pipeline;
mod scan;
mod sink;
mod transform;
mod visibility;
mod watch;

use thiserror::Error;

pub use list::{ListFrame, ListFramer};
pub use object::{Labels, Meta, compare_versions, labels};
pub use pipeline::{BATCH, Pipeline, Stop, StopSignal, list, until, watch};
pub use sink::{ListEnd, ListSink, ObjectSink, Sink, WatchSink};
pub use transform::{Transform, TransformError, Verdict};
pub use visibility::Visibility;
pub use watch::{Event, EventType, WatchFramer, failure_status};

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
