//! The one writer: a thread that takes what every response's tee sends, turns it into store
//! writes, and applies them in batches — non-durable for staging and watch events, durable
//! for every list commit and at least once a second while anything is unflushed. It alone
//! hands out what the tees draw on: list ids, the lists waiting for their next page, and
//! the in-flight budget.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use self::gather::{Gathered, MAX_BATCH, MAX_BATCH_BYTES, gather};
use super::budget::Budget;
use super::clock::RunningClock;
use super::message::{Message, Outbox};
use super::metrics::CacheMetrics;
use super::pages::PendingPages;
use super::store::{StoreError, StoreWriter, WriteOp};

/// After a batch that emptied the queue, the writer waits this long before taking the next,
/// so that one store transaction carries the watch events of 2 ms instead of one event, and
/// senders do not wake the writer once per event. Far below what fills the in-flight bound.
const GATHER: Duration = Duration::from_millis(2);
/// Longest time non-durable writes stay unflushed.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// How often the writer records the gateway's running time: a crash loses at most this much
/// of it, which delays garbage collection by as much (it works in days).
const RUNNING_EVERY: Duration = Duration::from_secs(300);

/// The clocks the writer records now and then: the gateway's running time, and the highest
/// resourceVersion the cloud was seen at.
#[derive(Clone)]
pub(crate) struct Clocks {
    /// Seconds the gateway has run over the store.
    pub(crate) running: Arc<RunningClock>,
    /// The highest resourceVersion the cloud was seen at (0: none yet).
    pub(crate) cloud: Arc<AtomicU64>,
}

/// The writer: its thread, the way to it, and what it hands out to the tees.
pub(crate) struct Writer {
    outbox: Outbox,
    budget: Budget,
    pages: Arc<PendingPages>,
    /// The id of the next list: ids only grow, so a replaced store can tell the lists that
    /// began on it (see `GuardedStore`).
    next_list: AtomicU64,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// Starts the writer's thread over `store`; without it (it cannot start) nothing is
    /// cached, and every send fails.
    pub(crate) fn start(
        store: Arc<dyn StoreWriter>,
        metrics: CacheMetrics,
        clocks: Clocks,
    ) -> Writer {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("cache-writer".into())
            .spawn(move || write_until_closed(&store, &rx, &metrics, &clocks))
            .ok();
        if thread.is_none() {
            tracing::error!("cannot start the cache writer thread; nothing will be cached");
        }
        Writer {
            outbox: thread
                .as_ref()
                .map_or_else(Outbox::default, |_| Outbox::new(tx)),
            budget: Budget::default(),
            pages: Arc::default(),
            next_list: AtomicU64::new(1),
            thread: Mutex::new(thread),
        }
    }

    /// The way to the writer.
    pub(crate) fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// The in-flight budget the tees draw on.
    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// The lists waiting for their next page.
    pub(crate) fn pages(&self) -> &Arc<PendingPages> {
        &self.pages
    }

    /// A new list's id.
    pub(crate) fn new_list(&self) -> u64 {
        self.next_list.fetch_add(1, Ordering::Relaxed)
    }

    /// Blocks until everything sent so far is durable.
    pub(crate) fn flush(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.outbox.send(Message::Flush(tx)) {
            let _ = rx.recv_timeout(Duration::from_secs(30));
        }
    }

    /// Answers once everything sent so far is applied (readable by the store's readers);
    /// at once when there is no writer.
    pub(crate) fn applied(&self) -> tokio::sync::oneshot::Receiver<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.outbox.send(Message::Applied(tx));
        rx
    }

    /// Flushes and stops the thread.
    pub(crate) fn close(&self) {
        self.flush();
        self.outbox.close();
        if let Some(thread) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.outbox.close();
    }
}

/// Runs the writer loop until every sender is gone. A panic in it (the store contains its
/// own, see `GuardedStore`) loses the batch in hand, is logged and counted as a write error,
/// and the loop starts again: a dead writer would silently cache nothing.
fn write_until_closed(
    store: &Arc<dyn StoreWriter>,
    rx: &Receiver<Message>,
    metrics: &CacheMetrics,
    clocks: &Clocks,
) {
    loop {
        let run = std::panic::AssertUnwindSafe(|| run(store, rx, metrics, clocks));
        match std::panic::catch_unwind(run) {
            Ok(()) => return,
            Err(_) => {
                metrics.write_errors.inc();
                tracing::error!("the cache writer panicked; its batch is lost, and it goes on");
            }
        }
    }
}

/// The writer loop: runs until every sender is gone.
fn run(
    store: &Arc<dyn StoreWriter>,
    rx: &Receiver<Message>,
    metrics: &CacheMetrics,
    clocks: &Clocks,
) {
    let mut unflushed = false;
    let mut last_durable = Instant::now();
    let mut last_running = Instant::now();
    let mut stored_cloud = 0;
    loop {
        let first = match rx.recv_timeout(FLUSH_EVERY) {
            Ok(message) => Some(message),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let Gathered {
            mut batch,
            held,
            flushes,
            applied,
            locals,
            collects,
            mut durable,
            taken,
            bytes,
        } = gather(first, rx, metrics);
        if last_running.elapsed() >= RUNNING_EVERY {
            last_running = Instant::now();
            batch.push(WriteOp::Running {
                secs: clocks.running.secs(),
            });
        }
        // With whatever else is written: a power-off keeps what the cloud was last seen at,
        // the room local writes have below it.
        let cloud = clocks.cloud.load(Ordering::Relaxed);
        if cloud > stored_cloud && (!batch.is_empty() || durable) {
            stored_cloud = cloud;
            batch.push(WriteOp::VersionClock {
                clock: super::store::VersionClock::Cloud,
                version: cloud,
            });
        }
        durable |= unflushed && last_durable.elapsed() >= FLUSH_EVERY;
        if batch.is_empty() && !durable {
            collect(store.as_ref(), collects);
            for reply in applied {
                let _ = reply.send(());
            }
            continue;
        }
        let outcome = store.apply(&batch, durable);
        for done in locals {
            let _ = done.send(match &outcome {
                Ok(_) => Ok(()),
                Err(error) => Err(crate::error::error_chain(error)),
            });
        }
        match outcome {
            Ok(applied) => {
                metrics.unreadable.inc_by(applied.unreadable);
                // Counted once applied: a reader that sees the count sees the set.
                let commits = batch
                    .iter()
                    .filter(|op| matches!(op, WriteOp::Commit { .. }))
                    .count();
                metrics.commits.inc_by(commits as u64);
                if durable {
                    unflushed = false;
                    last_durable = Instant::now();
                } else {
                    unflushed |= applied.wrote;
                }
            }
            Err(error) => {
                metrics.write_errors.inc();
                // A disk fault is logged once for all the writes it fails (see `GuardedStore`).
                if error.disk_fault().is_some() {
                    tracing::debug!(error = %crate::error::error_chain(&error), writes = batch.len(), "cache write failed");
                } else {
                    tracing::error!(error = %crate::error::error_chain(&error), writes = batch.len(), "cache write failed");
                }
            }
        }
        drop(held);
        collect(store.as_ref(), collects);
        let flushed = !flushes.is_empty() || !applied.is_empty();
        for reply in flushes {
            let _ = reply.send(());
        }
        // Applied, or failed: a reader then reads what the store holds either way.
        for reply in applied {
            let _ = reply.send(());
        }
        if taken < MAX_BATCH && bytes < MAX_BATCH_BYTES && !flushed {
            std::thread::park_timeout(GATHER);
        }
    }
    if unflushed && let Err(error) = store.apply(&[], true) {
        tracing::error!(error = %crate::error::error_chain(&error), "final cache flush failed");
    }
}

/// Removes each component of `collects` (garbage collection), answering each.
fn collect(
    store: &dyn StoreWriter,
    collects: Vec<(String, std::sync::mpsc::Sender<Result<u64, StoreError>>)>,
) {
    for (component, done) in collects {
        let _ = done.send(store.remove_component(&component));
    }
}

mod gather;
