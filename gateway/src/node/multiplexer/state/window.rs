//! The recent changes of a state, what a client's watch resumes from: bounded by their age,
//! their number and the bytes of the objects they hold, the oldest forgotten first.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::time::Instant;

use super::{Change, WINDOW, WINDOW_BYTES, WINDOW_CHANGES};

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
