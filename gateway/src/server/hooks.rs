//! What the binary hands the gateway to call: functions of the process, not settings.

/// What the binary hands the gateway to call: functions of the process, not settings.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hooks {
    /// Hands back to the system the memory the process freed (glibc keeps freed blocks
    /// inside its heaps): called after each filter load, and off the runtime's threads every
    /// [`RETURN_FREED_EVERY`](super::RETURN_FREED_EVERY), as lists and watches free megabytes in the middle of the
    /// heaps, where trimming their tops does not reach; `None` does nothing.
    pub return_freed_memory: Option<fn()>,
    /// Called once, off the runtime's threads, when start-up is over: the gateway serving,
    /// its first filters loaded and their informers synced (or the informers' start-up wait
    /// passed), then the multiplexer's first lists in (or their wait ended), so that the
    /// binary can give back the pages of code only start-up ran; `None` does nothing.
    pub after_start: Option<fn()>,
}
