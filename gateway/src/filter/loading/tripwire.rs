//! A loaded filter's record of its recent failures, which turns it off at the failure its
//! `[disable-after]` names (see [`DisableAfter`]).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::filter::settings::DisableAfter;

/// The failures of one loaded filter within its window, and whether they turned it off.
#[derive(Debug)]
pub(crate) struct Tripwire {
    setting: Option<DisableAfter>,
    recent: Mutex<VecDeque<Instant>>,
    tripped: AtomicBool,
}

impl Tripwire {
    /// A tripwire that turns a filter off as `setting` says; never when `None`.
    pub(crate) fn new(setting: Option<DisableAfter>) -> Tripwire {
        Tripwire {
            setting,
            recent: Mutex::new(VecDeque::new()),
            tripped: AtomicBool::new(false),
        }
    }

    /// Whether the filter was turned off.
    pub(crate) fn tripped(&self) -> bool {
        self.tripped.load(Ordering::Relaxed)
    }

    /// Records a failure at `now`; true when this failure turns the filter off (once).
    pub(crate) fn failed(&self, now: Instant) -> bool {
        let Some(setting) = self.setting else {
            return false;
        };
        if self.tripped() {
            return false;
        }
        let mut recent = self
            .recent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        while recent
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) >= setting.window)
        {
            recent.pop_front();
        }
        recent.push_back(now);
        if recent.len() < setting.failures as usize {
            return false;
        }
        recent.clear();
        !self.tripped.swap(true, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn tripwire(failures: u32, seconds: u64) -> Tripwire {
        Tripwire::new(Some(DisableAfter {
            failures,
            window: Duration::from_secs(seconds),
        }))
    }

    #[test]
    fn the_nth_failure_within_the_window_trips_it_once() {
        let wire = tripwire(3, 60);
        let t0 = Instant::now();
        assert!(!wire.failed(t0));
        assert!(!wire.failed(t0 + Duration::from_secs(10)));
        assert!(!wire.tripped());
        assert!(wire.failed(t0 + Duration::from_secs(20)), "the third");
        assert!(wire.tripped());
        assert!(!wire.failed(t0 + Duration::from_secs(21)), "tripped once");
    }

    #[test]
    fn failures_older_than_the_window_do_not_count() {
        let wire = tripwire(3, 60);
        let t0 = Instant::now();
        assert!(!wire.failed(t0));
        assert!(!wire.failed(t0 + Duration::from_secs(30)));
        // The first has left the window: two within it.
        assert!(!wire.failed(t0 + Duration::from_secs(60)));
        assert!(!wire.tripped());
        assert!(wire.failed(t0 + Duration::from_secs(61)));
    }

    #[test]
    fn without_a_setting_it_never_trips() {
        let wire = Tripwire::new(None);
        let t0 = Instant::now();
        for n in 0..1000 {
            assert!(!wire.failed(t0 + Duration::from_millis(n)));
        }
        assert!(!wire.tripped());
    }
}
