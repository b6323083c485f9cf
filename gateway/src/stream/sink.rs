//! Where the filtered stream is teed besides the client: a trait per kind of response
//! ([`ListSink`], [`WatchSink`], [`ObjectSink`]), which the cache's tees implement; the
//! pipeline calls them with exactly what the client was sent.

use std::task::{Context, Poll};

use bytes::Bytes;

use super::stop::Stop;
use super::watch::Event;

/// The end of a list page, with what its metadata said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListEnd {
    /// The list's `kind`, e.g. `ServiceList`.
    pub kind: String,
    /// The list's `apiVersion`.
    pub api_version: String,
    /// `metadata.resourceVersion` of the list.
    pub resource_version: String,
    /// `metadata.continue`: non-empty when more pages follow.
    pub continue_token: String,
}

/// What every tee of a response takes, whatever its kind. Calls must not block: an
/// implementation that cannot keep up gives up on the response rather than hold the client,
/// or, for a list, asks for the pause it needs through [`ListSink::poll_ready`]. Each kind of
/// response has its own trait, so that a call that makes no sense for it (an item on a
/// watch) cannot be written.
pub trait Sink: Send {
    /// The response broke off; nothing of it may be committed.
    fn abort(&mut self, reason: &str);
}

/// Receives the items of one list response after the filter chain.
pub trait ListSink: Sink {
    /// Ready when the sink can take the items of the next upstream read of a list; the list
    /// pipeline waits for it before every read. A sink that never waits is always ready.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }
    /// One list item as the client received it.
    fn list_item(&mut self, object: &Bytes);
    /// The list (page) ended completely.
    fn list_end(&mut self, end: ListEnd);
}

/// Receives the events of one watch response after the filter chain.
pub trait WatchSink: Sink {
    /// One watch event as the client received it (BOOKMARK and ERROR included). A stop
    /// ends the watch after this event: the sink could not take it, and what it holds
    /// would otherwise fall behind the client's view without a word.
    fn event(&mut self, event: &Event) -> Option<Stop>;
}

/// Receives the object of one single-object response (get, create, update, patch).
pub trait ObjectSink: Sink {
    /// The object as the client received it.
    fn object(&mut self, object: &Bytes);
}
