//! The cache's two clocks: the wall clock its records are stamped with, and the gateway's
//! running time over its store, which garbage collection counts in (time the node was off
//! never counts).

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Seconds the gateway has run over its store: those of earlier runs (as the store last
/// recorded them) and those of this one, by the monotonic clock.
pub(crate) struct RunningClock {
    base: u64,
    started: tokio::time::Instant,
}

impl RunningClock {
    /// A clock that has run `base` seconds before now.
    pub(crate) fn new(base: u64) -> RunningClock {
        RunningClock {
            base,
            started: tokio::time::Instant::now(),
        }
    }

    /// The seconds run so far.
    pub(crate) fn secs(&self) -> u64 {
        self.base.saturating_add(self.started.elapsed().as_secs())
    }
}
