//! Which components the cache serves, and when it last did: what garbage collection asks
//! before it removes a component's cache. A component is in use while a response to it is
//! being served (a watch lasts minutes) and was last used when the last one ended.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::clock::RunningClock;
use super::message::{Message, Outbox};

/// How often a component's last use is written at most: GC works in days, so hourly is
/// plenty; [`Usage::collect_after`] makes it more often for a shorter `--cache-gc-after`
/// (so a restarted gateway finds a recent use), and garbage collection also asks when it
/// was last served in this run.
const TOUCH_EVERY_SECS: u64 = 3600;

/// When a component was last served in this run, when its use was last written (seconds
/// of running time), and how many responses to it are being served now.
#[derive(Clone, Copy, Default)]
struct Use {
    served: u64,
    written: u64,
    in_flight: u32,
}

/// The uses of every component in this run of the gateway.
pub(crate) struct Usage {
    uses: Mutex<HashMap<String, Use>>,
    touch_every: AtomicU64,
}

impl Usage {
    /// No component used yet.
    pub(crate) fn new() -> Usage {
        Usage {
            uses: Mutex::new(HashMap::new()),
            touch_every: AtomicU64::new(TOUCH_EVERY_SECS),
        }
    }

    /// Components unused for `after` are collected: a component in use must have a last
    /// use written well within that, however short it is.
    pub(crate) fn collect_after(&self, after: Duration) {
        let every = (after.as_secs() / 4).clamp(1, TOUCH_EVERY_SECS);
        self.touch_every.store(every, Ordering::Relaxed);
    }

    /// `component` was served at `now`, `in_flight` changed by `change`; returns `now` when
    /// its use is due to be written.
    pub(crate) fn served(&self, component: &str, now: u64, change: i32) -> Option<u64> {
        let every = self.touch_every.load(Ordering::Relaxed);
        let mut uses = self.uses.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up by `&str`: a component is named once, and served on every request.
        let (known, usage) = match uses.get_mut(component) {
            Some(usage) => (true, usage),
            None => (false, uses.entry(component.to_owned()).or_default()),
        };
        usage.served = now;
        usage.in_flight = usage.in_flight.saturating_add_signed(change);
        let due = !known || now.saturating_sub(usage.written) >= every;
        if due {
            usage.written = now;
        }
        due.then_some(now)
    }

    /// When `component` was last served in this run (seconds of running time), if it was:
    /// its use in the store may be up to an hour older.
    #[cfg(test)]
    pub(crate) fn last_served(&self, component: &str) -> Option<u64> {
        let uses = self.uses.lock().unwrap_or_else(|p| p.into_inner());
        uses.get(component).map(|usage| usage.served)
    }

    /// Runs `remove` if `component`, last used at `written` as the store says, is not being
    /// served and was last served before `cutoff` in this run too; then forgets its uses, so
    /// that the next one is written at once and the cache it builds anew is collected in
    /// turn. A response that starts meanwhile waits for the removal: its writes come after.
    pub(crate) fn collect_unused<R>(
        &self,
        component: &str,
        written: u64,
        cutoff: u64,
        remove: impl FnOnce() -> R,
    ) -> Option<R> {
        let mut uses = self.uses.lock().unwrap_or_else(|p| p.into_inner());
        let usage = uses.get(component).copied().unwrap_or_default();
        if usage.in_flight > 0 || written.max(usage.served) >= cutoff {
            return None;
        }
        let removed = remove();
        uses.remove(component);
        Some(removed)
    }
}

/// Records components' uses: the tally, the running clock they are counted in, and the way
/// to the writer that stores a use when it is due.
pub(crate) struct UseLog {
    /// The tally.
    pub(crate) usage: Usage,
    clock: Arc<RunningClock>,
    outbox: Outbox,
}

impl UseLog {
    /// A log counting in `clock`, storing through `outbox`.
    pub(crate) fn new(clock: Arc<RunningClock>, outbox: Outbox) -> UseLog {
        UseLog {
            usage: Usage::new(),
            clock,
            outbox,
        }
    }

    /// Records that `component` was served, with `change` responses more (or fewer) to it
    /// being served now; writes its use when due.
    pub(crate) fn note(&self, component: &str, change: i32) {
        if let Some(at) = self.usage.served(component, self.clock.secs(), change) {
            self.outbox.send(Message::Touch {
                component: component.to_owned(),
                at,
            });
        }
    }

    /// `component` is being served until the returned guard is dropped.
    pub(crate) fn serving(self: &Arc<Self>, component: &str) -> Serving {
        self.note(component, 1);
        Serving {
            log: self.clone(),
            component: component.to_owned(),
        }
    }
}

/// A response being served to a component, which is in use until this is dropped.
pub(crate) struct Serving {
    log: Arc<UseLog>,
    component: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.log.note(&self.component, -1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_being_served_is_never_collected_and_its_last_use_is_when_it_ended() {
        let usage = Usage::new();
        assert_eq!(
            usage.served("kubelet", 10, 1),
            Some(10),
            "first use: written"
        );
        assert_eq!(usage.collect_unused("kubelet", 10, 5000, || ()), None);
        // The response ends at 4000: its end is the last use.
        usage.served("kubelet", 4000, -1);
        assert_eq!(usage.last_served("kubelet"), Some(4000));
        assert_eq!(usage.collect_unused("kubelet", 10, 4000, || ()), None);
        assert_eq!(usage.collect_unused("kubelet", 10, 4001, || 7), Some(7));
        assert_eq!(
            usage.last_served("kubelet"),
            None,
            "forgotten once collected"
        );
    }

    #[test]
    fn uses_are_written_at_most_every_quarter_of_a_short_gc_after() {
        let usage = Usage::new();
        usage.collect_after(Duration::from_secs(60));
        assert_eq!(usage.served("kubelet", 0, 0), Some(0));
        assert_eq!(usage.served("kubelet", 14, 0), None);
        assert_eq!(usage.served("kubelet", 15, 0), Some(15));
    }
}
