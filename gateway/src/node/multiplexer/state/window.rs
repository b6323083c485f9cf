//! The recent changes of a state, what a client's watch resumes from: bounded by their age,
//! their number and the bytes of the objects they hold, the oldest forgotten first.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::node::multiplexer::object::Object;
use crate::stream::EventType;

/// How long a change stays in the window (kube-apiserver's watch cache, as YurtHub's
/// multiplexer uses it, keeps about three minutes).
pub const WINDOW: Duration = Duration::from_secs(180);

/// The most changes the window holds, whatever their age: it bounds the memory of a burst.
pub const WINDOW_CHANGES: usize = 8192;

/// The most bytes of objects the window's changes hold, whatever their age: under a heavy
/// churn the window is the last 2 MiB of changes (a thousand EndpointSlices of ten
/// endpoints), not three minutes of them. A watch from before it re-lists, from the node.
pub const WINDOW_BYTES: usize = 2 << 20;

/// How many changes an open watch may fall behind before it is ended (its client resumes
/// from the last version it saw, from the window).
pub const LAG: usize = 2048;

/// One change of the state, at `version`.
#[derive(Debug)]
pub struct Change {
    /// ADDED, MODIFIED or DELETED.
    pub kind: EventType,
    /// The resourceVersion of the change.
    pub version: u64,
    /// The object as the change left it (as deleted, for DELETED).
    pub object: Arc<Object>,
    /// The object before the change, if the state held it.
    pub previous: Option<Arc<Object>>,
    /// One of the node's own changes ([`Shared::apply_local`]).
    pub local: bool,
}

impl Change {
    /// Whether a watch that has seen the state at `since` is still to get this change: one
    /// after it, or one of the node's own dated at it (the local layer had no room to date
    /// it later; a client that listed after it gets it twice, the same bytes again).
    pub fn follows(&self, since: u64) -> bool {
        self.version > since || (self.local && self.version == since)
    }
}

/// Changes after `oldest`, oldest first, with when they were made.
#[derive(Default)]
pub(super) struct Window {
    changes: VecDeque<(Instant, Arc<Change>)>,
    /// The bytes of the objects the changes hold.
    bytes: usize,
    /// A watch from this version or a newer one resumes from the window.
    oldest: u64,
}

impl Window {
    /// Forgets every change: a watch resumes from `version` on.
    pub(super) fn restart(&mut self, version: u64) {
        self.changes.clear();
        self.bytes = 0;
        self.oldest = version;
    }

    /// Nothing changed up to `version`: with no change held, a watch from it resumes.
    pub(super) fn advance(&mut self, version: u64) {
        if self.changes.is_empty() {
            self.oldest = version;
        }
    }

    /// Adds `change`, made `now`, forgetting the changes past the bounds; the newest is
    /// kept whatever its size.
    pub(super) fn push(&mut self, now: Instant, change: Arc<Change>) {
        self.bytes += change.object.bytes.len();
        self.changes.push_back((now, change));
        while let Some((at, oldest)) = self.changes.front() {
            let within = self.changes.len() <= WINDOW_CHANGES
                && now.duration_since(*at) < WINDOW
                && self.bytes <= WINDOW_BYTES;
            if within || self.changes.len() == 1 {
                break;
            }
            self.oldest = oldest.version;
            self.bytes -= oldest.object.bytes.len();
            self.changes.pop_front();
        }
    }

    /// The oldest version a watch resumes from.
    pub(super) fn oldest(&self) -> u64 {
        self.oldest
    }

    /// The changes a watch that has seen the state at `since` is still to get.
    pub(super) fn since(&self, since: u64) -> Vec<Arc<Change>> {
        self.changes
            .iter()
            .map(|(_, change)| change)
            .filter(|change| change.follows(since))
            .cloned()
            .collect()
    }

    /// How many changes it holds.
    pub(super) fn len(&self) -> usize {
        self.changes.len()
    }
}
