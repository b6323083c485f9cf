//! What every tee holds, whatever its kind: the way to the writer, the in-flight budget it
//! draws on, the counters it bumps, and the use of its component it keeps open.

use tokio::sync::OwnedSemaphorePermit;

use crate::cache::budget::{Budget, BudgetWait};
use crate::cache::message::{Message, Outbox};
use crate::cache::metrics::CacheMetrics;
use crate::cache::usage::Serving;

/// A tee's link to the writer.
pub(crate) struct TeeLink {
    outbox: Outbox,
    budget: Budget,
    metrics: CacheMetrics,
    /// The response's component, in use until the tee is dropped (`None`: not counted).
    _serving: Option<Serving>,
}

impl TeeLink {
    /// A link sending to `outbox`, drawing on `budget`, counting in `metrics`, keeping
    /// `serving` open while the tee lives.
    pub(crate) fn new(
        outbox: Outbox,
        budget: Budget,
        metrics: CacheMetrics,
        serving: Option<Serving>,
    ) -> TeeLink {
        TeeLink {
            outbox,
            budget,
            metrics,
            _serving: serving,
        }
    }

    /// Sends `message` to the writer; false when the writer is gone.
    pub(super) fn send(&self, message: Message) -> bool {
        self.outbox.send(message)
    }

    /// The cache's counters.
    pub(super) fn metrics(&self) -> &CacheMetrics {
        &self.metrics
    }

    /// Room for `bytes` more in flight, or `None` (and a count) when the writer is behind.
    pub(super) fn room(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let room = self.budget.try_shared(bytes);
        if room.is_none() {
            self.metrics.refused.inc();
        }
        room
    }

    /// Room for `bytes` more of a set's first list, if the writer has some now.
    pub(super) fn first_list_room(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        self.budget.try_first_list(bytes)
    }

    /// Room for `bytes` more of a set's first list once the writer makes it (counted as a
    /// wait), or `None` when it does not in time.
    pub(super) fn wait_first_list_room(&self, bytes: usize) -> BudgetWait {
        self.metrics.list_waits.inc();
        self.budget.wait_first_list(bytes)
    }
}
