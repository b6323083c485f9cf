//! The tee of a watch response: hands each event to the writer, and ends the watch when one
//! finds no room, since the set would then fall behind its client without a word.

use std::sync::Arc;

use super::link::TeeLink;
use crate::cache::key::SetKey;
use crate::cache::message::Message;
use crate::stream::{Event, Sink, Stop, WatchSink};

/// The tee of one watch response.
pub struct WatchTee {
    link: TeeLink,
    set: Arc<SetKey>,
    /// Set once an event was lost or the watch broke off: nothing more is teed.
    done: bool,
}

impl WatchTee {
    /// A tee for a watch of `set`.
    pub(crate) fn new(link: TeeLink, set: SetKey) -> WatchTee {
        WatchTee {
            link,
            set: Arc::new(set),
            done: false,
        }
    }
}

impl Sink for WatchTee {
    fn abort(&mut self, _reason: &str) {
        self.done = true;
    }
}

impl WatchSink for WatchTee {
    fn event(&mut self, event: &Event) -> Option<Stop> {
        if self.done {
            return None;
        }
        if let Some(room) = self.link.room(event.object.len()) {
            self.link.send(Message::Event {
                set: self.set.clone(),
                event: event.clone(),
                room,
            });
            return None;
        }
        // A lost event (counted as refused) leaves a hole in the set: it stays at its last
        // consistent version until a list of it commits, and this watch ends with a 410 so
        // that its client re-lists now; resuming it would skip the hole for good.
        tracing::warn!(set = %self.set.encode(), "a watch event could not be cached; the set is stale until re-listed");
        self.link.send(Message::Lost {
            set: self.set.clone(),
        });
        self.done = true;
        Some(Stop::Relist(
            "edgegate: the local cache fell behind this watch; re-list".to_owned(),
        ))
    }
}
