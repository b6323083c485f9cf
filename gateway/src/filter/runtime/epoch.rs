//! The epoch ticker that bounds how long any filter call may run.
//!
//! Deadlines use epoch interruption: a counter check at loop heads and function entries,
//! cheaper than fuel (measured: benches/HISTORY.md, "Measurements behind choices in the
//! code"). The ticker advances the epoch every [`EPOCH_TICK`] while calls are running and
//! for [`EPOCH_LINGER`] after the last one, then sleeps, so an idle edge node pays no
//! wake-ups and a busy one (a watch event is one short call) does not wake the ticker once
//! per call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use wasmtime::Engine;

/// How often the epoch advances while a call runs: a deadline is enforced to within one
/// tick. 2 ms is well under any useful deadline (tens of ms) and, since the ticker only
/// runs while calls are in flight, costs at most 500 wake-ups a second under load.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(2);

/// How long the ticker keeps ticking after the last call ended before it sleeps.
pub(crate) const EPOCH_LINGER: Duration = Duration::from_millis(100);

/// A running call; the ticker sleeps again when the last guard is dropped.
pub(crate) struct CallGuard<'a> {
    ticker: &'a Ticker,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.ticker.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The thread that advances the epoch while calls are running.
pub(crate) struct Ticker {
    active: Arc<AtomicUsize>,
    /// Set by the ticker before it parks with no deadline; a call that finds it set wakes it.
    sleeping: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Ticker {
    /// Starts the thread that advances `engine`'s epoch.
    pub(crate) fn start(engine: Engine) -> std::io::Result<Ticker> {
        let active = Arc::new(AtomicUsize::new(0));
        let sleeping = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let linger = u32::try_from(EPOCH_LINGER.as_micros() / EPOCH_TICK.as_micros().max(1))
            .unwrap_or(u32::MAX);
        let thread = {
            let (active, sleeping, stop) = (
                Arc::clone(&active),
                Arc::clone(&sleeping),
                Arc::clone(&stop),
            );
            // A thread of its own, not a runtime task: filter calls block the runtime's
            // workers, and a ticker scheduled on them could never stop those calls.
            thread::Builder::new()
                .name("edgegate-epoch".into())
                .spawn(move || {
                    let mut idle_ticks = 0u32;
                    while !stop.load(Ordering::Acquire) {
                        if active.load(Ordering::SeqCst) > 0 {
                            idle_ticks = 0;
                        } else if idle_ticks >= linger {
                            // Announce the sleep, then look again: a call that started in
                            // between either sees the flag (and wakes us) or is seen here.
                            sleeping.store(true, Ordering::SeqCst);
                            if active.load(Ordering::SeqCst) == 0 {
                                thread::park();
                            }
                            sleeping.store(false, Ordering::SeqCst);
                            idle_ticks = 0;
                            continue;
                        } else {
                            idle_ticks += 1;
                        }
                        thread::park_timeout(EPOCH_TICK);
                        engine.increment_epoch();
                    }
                })?
        };
        Ok(Ticker {
            active,
            sleeping,
            stop,
            thread,
        })
    }

    /// Marks a call as running for as long as the guard lives, waking the ticker if it sleeps.
    pub(crate) fn enter(&self) -> CallGuard<'_> {
        self.active.fetch_add(1, Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            self.thread.thread().unpark();
        }
        CallGuard { ticker: self }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
    }
}
