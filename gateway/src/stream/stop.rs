//! How an open watch is told to end: a signal resolving to why.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// Why an open watch is ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// End the stream cleanly (the cloud went away, the gateway stops).
    End,
    /// End it with an ERROR event `410 Expired`, so the client re-lists: what it would be
    /// shown changed although the objects did not.
    Relist(String),
    /// What it would be shown changed (its filters, or what they looked up): send nothing
    /// more — the rest would be filtered as before — and after `after` (a jitter, so a
    /// node's clients do not all re-list at once) end it as [`Stop::Relist`] does.
    Stale {
        /// The ERROR event's message.
        message: String,
        /// How long the watch stays open, silent, before it ends.
        after: Duration,
    },
}

/// Resolves when an open watch must end, and says how.
pub type StopSignal = Pin<Box<dyn Future<Output = Stop> + Send>>;
