//! Where the filtered stream is teed besides the client. The cache implements [`Sink`]; the
//! pipeline calls it with exactly what the client was sent.

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

/// Receives the objects of one response after the filter chain. Calls must not block: an
/// implementation that cannot keep up gives up on the response rather than hold the client,
/// or, for a list, asks for the pause it needs through [`Sink::poll_ready`].
pub trait Sink: Send {
    /// Ready when the sink can take the items of the next upstream read of a list; the list
    /// pipeline waits for it before every read. A sink that never waits is always ready.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }
    /// One list item as the client received it.
    fn list_item(&mut self, object: &Bytes);
    /// The list (page) ended completely.
    fn list_end(&mut self, end: ListEnd);
    /// One watch event as the client received it (BOOKMARK and ERROR included). A stop
    /// ends the watch after this event: the sink could not take it, and what it holds
    /// would otherwise fall behind the client's view without a word.
    fn event(&mut self, event: &Event) -> Option<Stop>;
    /// The object of a single-object response (get, create, update, patch).
    fn object(&mut self, object: &Bytes);
    /// The response broke off; nothing of it may be committed.
    fn abort(&mut self, reason: &str);
}
