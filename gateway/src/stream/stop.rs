//! How an open watch is told to end: a signal resolving to why.

use std::future::Future;
use std::pin::Pin;

/// Why an open watch is ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// End the stream cleanly (the cloud went away, the gateway stops).
    End,
    /// End it with an ERROR event `410 Expired`, so the client re-lists: what it would be
    /// shown changed although the objects did not.
    Relist(String),
}

/// Resolves when an open watch must end, and says how.
pub type StopSignal = Pin<Box<dyn Future<Output = Stop> + Send>>;
