//! What the guard knows of its disk: the fault it is in (logged and counted once per
//! episode, logged again when it ends), when to try the file again, and which sets a fault
//! may have left with a hole.
//!
//! Opening the file after a fault goes back to its last durable commit, so the watch events
//! of non-durable batches since then are gone, as are those of the batches that failed.
//! Their sets hold what they held at an older resourceVersion, consistently, but their
//! watches go on from a newer one: the first write after the store opens again marks them
//! stale (as a watch event without room in the writer's queue does), so that no offline
//! watch is answered across the hole, until a list of each commits again.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::cache::clock::now;
use crate::cache::key::SetKey;
use crate::cache::metrics::{CacheMetrics, FaultLabels};
use crate::cache::store::{Fault, StoreError, WriteOp};

/// How often a closed store is tried again while it is used: a disk freed or remounted
/// is noticed within about this long, and a disk that stays broken costs one failed open
/// per period.
const RETRY: Duration = Duration::from_secs(1);

/// How long durable writes must work, with no write failing, before a fault is over: a
/// nearly full disk takes some writes and fails others (the file opens again, and what a
/// failed transaction took is free again), and that is one fault, not one per write.
const SETTLE: Duration = Duration::from_secs(5);

/// The disk's state, behind one lock: the writer takes it once per batch.
#[derive(Default)]
pub(super) struct Disk {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    fault: Option<Fault>,
    episodes: u64,
    /// When the last attempt to open the file again was.
    tried: Option<Instant>,
    /// Since when durable writes work, during a fault, with none failing since.
    working: Option<Instant>,
    /// Sets written by non-durable batches since the last durable one.
    volatile: HashSet<SetKey>,
    /// Sets to mark stale in the first write that succeeds.
    stale: HashSet<SetKey>,
}

impl Disk {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fault the disk is in, if any.
    pub(super) fn fault(&self) -> Option<Fault> {
        let mut state = self.state();
        state.settle();
        state.fault.clone()
    }

    /// The disk failed with `error` and the store was closed: a new episode unless one is
    /// on (logged and counted once), and what was written since the last durable commit is
    /// lost with it.
    pub(super) fn began(&self, error: &StoreError, metrics: &CacheMetrics) {
        let mut state = self.state();
        let volatile = std::mem::take(&mut state.volatile);
        state.stale.extend(volatile);
        state.tried = None;
        state.working = None;
        if state.fault.is_some() {
            return;
        }
        let kind = error.disk_fault().unwrap_or("io");
        let reason = crate::error::error_chain(error);
        state.episodes += 1;
        metrics
            .disk_faults
            .get_or_create(&FaultLabels { kind })
            .inc();
        tracing::error!(
            kind,
            error = %reason,
            "the cache disk fails; the cache is closed and opened again at most once a second until a write works (the gateway keeps forwarding)"
        );
        state.fault = Some(Fault {
            kind,
            since: now(),
            reason,
            episodes: state.episodes,
        });
    }

    /// Whether the closed store may be tried again now; if so, the attempt is counted as
    /// made.
    pub(super) fn retry_due(&self) -> bool {
        let mut state = self.state();
        let due = state.tried.is_none_or(|at| at.elapsed() >= RETRY);
        if due {
            state.tried = Some(Instant::now());
        }
        due
    }

    /// `ops` were applied; `durable` made them, and all before them, survive. Durable
    /// writes end a fault once they worked for [`SETTLE`]: the file opens again on a full
    /// disk, as it needs no room, and only writes that had to reach the disk show it takes
    /// writes again.
    pub(super) fn applied(&self, ops: &[WriteOp], durable: bool) {
        let mut state = self.state();
        if durable {
            state.volatile.clear();
            if state.fault.is_some() {
                state.working.get_or_insert_with(Instant::now);
                state.settle();
            }
            return;
        }
        for set in sets_of(ops) {
            if !state.volatile.contains(set) {
                state.volatile.insert(set.clone());
            }
        }
    }

    /// `ops` were not applied: their sets miss what they brought.
    pub(super) fn lost(&self, ops: &[WriteOp]) {
        let mut state = self.state();
        state.working = None;
        for set in sets_of(ops) {
            if !state.stale.contains(set) {
                state.stale.insert(set.clone());
            }
        }
    }

    /// The sets to mark stale, taken for a write; given back with [`Disk::keep_stale`]
    /// when that write fails.
    pub(super) fn take_stale(&self) -> Vec<SetKey> {
        let mut state = self.state();
        if state.stale.is_empty() {
            return Vec::new();
        }
        state.stale.drain().collect()
    }

    /// Gives back sets [`Disk::take_stale`] took.
    pub(super) fn keep_stale(&self, sets: Vec<SetKey>) {
        self.state().stale.extend(sets);
    }
}

impl State {
    /// Ends the fault once durable writes worked for [`SETTLE`].
    fn settle(&mut self) {
        if self.working.is_none_or(|since| since.elapsed() < SETTLE) {
            return;
        }
        self.working = None;
        if let Some(fault) = self.fault.take() {
            tracing::info!(
                kind = fault.kind,
                lasted_secs = now().saturating_sub(fault.since),
                "the cache disk works again; the cache is open"
            );
        }
    }
}

/// The sets watch writes in `ops` move. A list's commit needs no mark: it is durable, and
/// the set is what the list held or what it held before.
fn sets_of(ops: &[WriteOp]) -> impl Iterator<Item = &SetKey> {
    ops.iter().filter_map(|op| match op {
        WriteOp::Synced { set, .. }
        | WriteOp::Remove { set, .. }
        | WriteOp::Entered { set, .. }
        | WriteOp::Lost { set } => Some(set),
        _ => None,
    })
}

#[cfg(test)]
mod tests;
