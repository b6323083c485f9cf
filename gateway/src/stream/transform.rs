//! The hook through which a response's objects pass on their way to the client and the cache:
//! the filter chain implements it, the stream pipeline calls it once per object.

use bytes::Bytes;
use thiserror::Error;

/// What becomes of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Forward the object's original bytes.
    Keep,
    /// Leave the object out (in a watch: the client is told it is gone if it had seen it).
    Drop,
    /// Forward these bytes instead.
    Replace(Bytes),
}

/// A transform that must fail the whole response (a fail-closed filter failed).
#[derive(Debug, Error)]
#[error("{message}")]
pub struct TransformError {
    /// What failed, for the client's `Status` and the log.
    pub message: String,
}

/// Decides about each object of one response. Created per response, so it may keep state
/// (checked-out filter instances) for the life of the stream.
pub trait Transform: Send {
    /// Decides about one object (JSON bytes).
    fn apply(&mut self, object: &Bytes) -> Result<Verdict, TransformError>;

    /// Decides about several list items at once: one verdict per object, in order.
    fn apply_batch(&mut self, objects: &[Bytes]) -> Result<Vec<Verdict>, TransformError> {
        objects.iter().map(|object| self.apply(object)).collect()
    }

    /// Told that the object of `key` (`namespace/name`, or `name` when cluster-scoped) is
    /// gone (a watch's DELETED event, decided about already), so nothing is kept for it.
    fn forget(&mut self, _key: &str) {}

    /// Whether the object of `key`, just decided about in a MODIFIED event, was sent again
    /// to be filtered anew after a lookup change (`None`: it was not), and if so whether
    /// every filter has made of it what it made of it before that change. Asked once per
    /// MODIFIED event.
    fn resent(&mut self, _key: &str) -> Option<bool> {
        None
    }
}
