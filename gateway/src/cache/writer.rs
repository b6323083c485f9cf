//! The one writer: a thread that takes what every response's tee sends, turns it into store
//! writes, and applies them in batches — non-durable for staging and watch events, durable
//! for every list commit and at least once a second while anything is unflushed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use tokio::sync::OwnedSemaphorePermit;

use super::clock::{RunningClock, now};
use super::key::{ResourceKey, SetKey};
use super::metrics::CacheMetrics;
use super::policy::{CachePolicy, CacheTarget};
use super::room::{Room, RoomWait};
use super::store::{SetMeta, Store, WriteOp};
use super::tee::CacheTee;
use super::usage::Usage;
use crate::stream::{Event, EventType, ListEnd, Meta};

/// Writes applied in one transaction at most.
const MAX_BATCH: usize = 1024;
/// Object bytes applied in one transaction at most: the store keeps a transaction's dirty
/// pages in memory until it commits, so this bounds what one batch adds to the gateway's.
const MAX_BATCH_BYTES: usize = 256 << 10;
/// After a batch that emptied the queue, the writer waits this long before taking the next,
/// so that one store transaction carries the watch events of 2 ms instead of one event, and
/// senders do not wake the writer once per event. Far below what fills the in-flight bound.
const GATHER: Duration = Duration::from_millis(2);
/// Longest time non-durable writes stay unflushed.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// How often the writer records the gateway's running time: a crash loses at most this much
/// of it, which delays garbage collection by as much (it works in days).
const RUNNING_EVERY: Duration = Duration::from_secs(300);
/// A later page of a paginated list must arrive within this time (kube-apiserver's continue
/// tokens expire after about five minutes).
const PAGE_TIMEOUT: Duration = Duration::from_secs(300);

/// What a tee sends the writer.
pub(crate) enum Op {
    /// A list item, to stage under list `list`.
    Item {
        list: u64,
        resource: Arc<ResourceKey>,
        object: Bytes,
        room: OwnedSemaphorePermit,
    },
    /// List `list` ended on its last page: commit it to `set`.
    Commit {
        list: u64,
        set: Arc<SetKey>,
        end: ListEnd,
        items: u64,
    },
    /// List `list` broke off.
    Abort { list: u64 },
    /// A watch event of `set`, as the client received it.
    Event {
        set: Arc<SetKey>,
        event: Event,
        room: OwnedSemaphorePermit,
    },
    /// A watch event of `set` had no room: the set is stale until a list of it commits.
    Lost { set: Arc<SetKey> },
    /// A single-object response.
    Object {
        resource: Arc<ResourceKey>,
        object: Bytes,
        room: OwnedSemaphorePermit,
    },
    /// A component was served.
    Touch { component: String, at: u64 },
    /// The gateway has run this many seconds over the store.
    Running(u64),
    /// Answer once everything sent before is durable.
    Flush(Sender<()>),
}

/// A paginated list waiting for its next page.
struct PendingPages {
    list: u64,
    items: u64,
    since: Instant,
}

/// The cache: its policy, its store for readers, and the writer every tee feeds.
pub struct Cache {
    /// What is cached now: the agents it started with and those `yurt-hub-cfg` adds.
    policy: ArcSwap<CachePolicy>,
    /// The agents it started with (defaults and `--cache-agents`).
    base_agents: Vec<String>,
    store: Arc<dyn Store>,
    ops: Mutex<Option<Sender<Op>>>,
    room: Room,
    next_list: AtomicU64,
    pages: Mutex<HashMap<String, PendingPages>>,
    usage: Usage,
    clock: Arc<RunningClock>,
    metrics: CacheMetrics,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Cache {
    /// Starts the writer over `store`.
    pub fn start(store: Arc<dyn Store>, policy: CachePolicy, metrics: CacheMetrics) -> Arc<Cache> {
        let base_agents = policy.agents();
        let (tx, rx) = std::sync::mpsc::channel();
        let base = store.running_secs().unwrap_or_else(|error| {
            tracing::warn!(error = %crate::error::error_chain(&error), "cannot read the gateway's running time; counting from zero");
            0
        });
        let clock = Arc::new(RunningClock::new(base));
        let writer = {
            let store = store.clone();
            let metrics = metrics.clone();
            let clock = clock.clone();
            std::thread::Builder::new()
                .name("cache-writer".into())
                .spawn(move || write_until_closed(&store, &rx, &metrics, &clock))
                .ok()
        };
        if writer.is_none() {
            tracing::error!("cannot start the cache writer thread; nothing will be cached");
        }
        Arc::new(Cache {
            policy: ArcSwap::from_pointee(policy),
            base_agents,
            store,
            ops: Mutex::new(writer.is_some().then_some(tx)),
            room: Room::default(),
            next_list: AtomicU64::new(1),
            pages: Mutex::new(HashMap::new()),
            usage: Usage::new(),
            clock,
            metrics,
            writer: Mutex::new(writer),
        })
    }

    /// What is cached now.
    pub fn policy(&self) -> arc_swap::Guard<Arc<CachePolicy>> {
        self.policy.load()
    }

    /// Caches the components in `extra` too, besides those it started with, until the next
    /// call (YurtHub's `cache_agents` of `yurt-hub-cfg`: additive, and replaced as a whole
    /// when the ConfigMap changes). What is cached of agents no longer named stays until
    /// garbage collection takes it, as YurtHub leaves it.
    pub fn set_extra_agents(&self, extra: &[String]) {
        let agents: Vec<&str> = self
            .base_agents
            .iter()
            .chain(extra)
            .map(String::as_str)
            .collect();
        self.policy.store(Arc::new(CachePolicy::new(&agents)));
    }

    /// The store, for readers.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The cache's metrics.
    pub fn metrics(&self) -> &CacheMetrics {
        &self.metrics
    }

    /// A tee for one response to `component`, which is in use until the tee is dropped.
    pub fn tee(self: &Arc<Self>, component: &str, target: CacheTarget) -> Option<CacheTee> {
        self.note_use(component, 1);
        let tee = CacheTee::new(self.clone(), target);
        if tee.is_none() {
            self.note_use(component, -1);
        }
        tee.map(|tee| tee.serving(component))
    }

    /// A response for `target` that is not cached after all (an error, a protobuf answer):
    /// nothing to tee, but a later page of a list ends that list, uncommitted.
    pub fn pass_up(self: &Arc<Self>, target: CacheTarget) {
        if let CacheTarget::List {
            continue_from: Some(_),
            ..
        } = target
        {
            drop(CacheTee::new(self.clone(), target));
        }
    }

    /// Seconds the gateway has run over this store: the clock of components' last uses.
    pub fn running_secs(&self) -> u64 {
        self.clock.secs()
    }

    /// Tells the cache that components unused for `after` are collected: a component in
    /// use must have a last use written well within that, however short it is.
    pub fn collect_after(&self, after: Duration) {
        self.usage.collect_after(after);
    }

    /// Records that `component` was served (for garbage collection).
    pub fn touch(&self, component: &str) {
        self.note_use(component, 0);
    }

    /// Records that `component` was served, with `change` responses more (or fewer) to it
    /// being served now; writes its use when due.
    pub(crate) fn note_use(&self, component: &str, change: i32) {
        if let Some(at) = self.usage.served(component, self.running_secs(), change) {
            self.send(Op::Touch {
                component: component.to_owned(),
                at,
            });
        }
    }

    /// Runs `remove` (which removes `component`'s cache) if the component is not being
    /// served and was last used before `cutoff`, by the store's record (`written`) and by
    /// this run's; a response to it that starts meanwhile waits until it is done.
    pub(crate) fn collect_unused<R>(
        &self,
        component: &str,
        written: u64,
        cutoff: u64,
        remove: impl FnOnce() -> R,
    ) -> Option<R> {
        self.usage
            .collect_unused(component, written, cutoff, remove)
    }

    /// Blocks until everything sent so far is durable. For shutdown and tests.
    pub fn flush(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.send(Op::Flush(tx)) {
            let _ = rx.recv_timeout(Duration::from_secs(30));
        }
    }

    /// Flushes and stops the writer.
    pub fn close(&self) {
        self.send(Op::Running(self.running_secs()));
        self.flush();
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = writer.join();
        }
    }

    pub(crate) fn new_list(&self) -> u64 {
        self.next_list.fetch_add(1, Ordering::Relaxed)
    }

    /// Room for `bytes` more in flight, or `None` (and a count) when the writer is behind.
    pub(crate) fn room(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let room = self.room.try_shared(bytes);
        if room.is_none() {
            self.metrics.refused.inc();
        }
        room
    }

    /// Room for `bytes` more of a set's first list, if the writer has some now.
    pub(crate) fn first_list_room(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        self.room.try_first_list(bytes)
    }

    /// Room for `bytes` more of a set's first list once the writer makes it (counted as a
    /// wait), or `None` when it does not in time.
    pub(crate) fn wait_first_list_room(&self, bytes: usize) -> RoomWait {
        self.metrics.list_waits.inc();
        self.room.wait_first_list(bytes)
    }

    /// Whether the store holds a committed list of `set` (unreadable counts as no).
    pub(crate) fn holds(&self, set: &SetKey) -> bool {
        self.store
            .sets(&set.encode())
            .is_ok_and(|sets| sets.iter().any(|(held, _)| held == set))
    }

    /// Sends an op to the writer; false when the writer is gone.
    pub(crate) fn send(&self, op: Op) -> bool {
        let ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        ops.as_ref().is_some_and(|tx| tx.send(op).is_ok())
    }

    /// Parks a list whose page ended with `token`, for the request of the next page.
    pub(crate) fn park_pages(&self, token: String, list: u64, items: u64) {
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        let expired: Vec<String> = pages
            .iter()
            .filter(|(_, p)| p.since.elapsed() > PAGE_TIMEOUT)
            .map(|(t, _)| t.clone())
            .collect();
        for token in expired {
            if let Some(stale) = pages.remove(&token) {
                self.send(Op::Abort { list: stale.list });
                self.metrics.aborted.inc();
            }
        }
        pages.insert(
            token,
            PendingPages {
                list,
                items,
                since: Instant::now(),
            },
        );
    }

    /// The list a request with `continue=token` continues, and its item count so far.
    pub(crate) fn resume_pages(&self, token: &str) -> Option<(u64, u64)> {
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        pages.remove(token).map(|p| (p.list, p.items))
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// Runs the writer loop until every sender is gone. A panic in it (the store contains its
/// own, see `GuardedStore`) loses the batch in hand, is logged and counted as a write error,
/// and the loop starts again: a dead writer would silently cache nothing.
fn write_until_closed(
    store: &Arc<dyn Store>,
    rx: &Receiver<Op>,
    metrics: &CacheMetrics,
    clock: &RunningClock,
) {
    loop {
        let run = std::panic::AssertUnwindSafe(|| run(store, rx, metrics, clock));
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
fn run(store: &Arc<dyn Store>, rx: &Receiver<Op>, metrics: &CacheMetrics, clock: &RunningClock) {
    let mut unflushed = false;
    let mut last_durable = Instant::now();
    let mut last_running = Instant::now();
    loop {
        let first = match rx.recv_timeout(FLUSH_EVERY) {
            Ok(op) => Some(op),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut batch = Vec::new();
        // Room stays taken until the writes are applied: the bound covers the whole way.
        let mut held = Vec::new();
        let mut flushes = Vec::new();
        let mut durable = false;
        let (mut taken, mut bytes) = (0, 0);
        let mut next = first;
        while let Some(op) = next {
            taken += 1;
            let rooms = held.len();
            match op {
                Op::Flush(reply) => {
                    durable = true;
                    flushes.push(reply);
                }
                op => durable |= write_ops(op, &mut batch, &mut held, metrics),
            }
            bytes += held[rooms..]
                .iter()
                .map(|room| room.num_permits())
                .sum::<usize>();
            if taken >= MAX_BATCH || bytes >= MAX_BATCH_BYTES {
                break;
            }
            next = rx.try_recv().ok();
        }
        if last_running.elapsed() >= RUNNING_EVERY {
            last_running = Instant::now();
            batch.push(WriteOp::Running { secs: clock.secs() });
        }
        durable |= unflushed && last_durable.elapsed() >= FLUSH_EVERY;
        if batch.is_empty() && !durable {
            continue;
        }
        match store.apply(&batch, durable) {
            Ok(wrote) => {
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
                    unflushed |= wrote;
                }
            }
            Err(error) => {
                metrics.write_errors.inc();
                tracing::error!(error = %crate::error::error_chain(&error), writes = batch.len(), "cache write failed");
            }
        }
        drop(held);
        let flushed = !flushes.is_empty();
        for reply in flushes {
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

/// Turns one op into store writes; returns whether they must be durable.
fn write_ops(
    op: Op,
    batch: &mut Vec<WriteOp>,
    held: &mut Vec<OwnedSemaphorePermit>,
    metrics: &CacheMetrics,
) -> bool {
    match op {
        Op::Item {
            list,
            resource,
            object,
            room,
        } => {
            held.push(room);
            if let Some(meta) = meta_of(&object, metrics) {
                let key = resource.object_key(&meta.namespace, &meta.name);
                batch.push(WriteOp::Stage { list, key, object });
            }
        }
        Op::Commit {
            list,
            set,
            end,
            items,
        } => {
            batch.push(WriteOp::Commit {
                list,
                set: (*set).clone(),
                meta: SetMeta {
                    resource_version: end.resource_version,
                    list_kind: end.kind,
                    api_version: end.api_version,
                    committed_at: now(),
                    items,
                    ..SetMeta::default()
                },
            });
            return true;
        }
        Op::Abort { list } => batch.push(WriteOp::Abort { list }),
        Op::Event { set, event, room } => {
            held.push(room);
            event_ops(&set, event, batch, metrics);
        }
        Op::Lost { set } => {
            batch.push(WriteOp::Lost {
                set: (*set).clone(),
            });
            // A restart must not find the set claiming to be synced past the hole.
            return true;
        }
        Op::Object {
            resource,
            object,
            room,
        } => {
            held.push(room);
            if let Some(meta) = meta_of(&object, metrics) {
                let key = resource.object_key(&meta.namespace, &meta.name);
                let resource_version = meta.resource_version.into_owned();
                batch.push(WriteOp::Upsert {
                    key,
                    object,
                    resource_version,
                });
            }
        }
        Op::Touch { component, at } => batch.push(WriteOp::Touch { component, at }),
        Op::Running(secs) => batch.push(WriteOp::Running { secs }),
        Op::Flush(_) => return true,
    }
    false
}

/// The metadata of `object`, counting its bytes; `None` (counted) when it cannot be read.
fn meta_of<'a>(object: &'a Bytes, metrics: &CacheMetrics) -> Option<Meta<'a>> {
    let Ok(meta) = Meta::parse(object) else {
        metrics.unreadable.inc();
        return None;
    };
    metrics.bytes.inc_by(object.len() as u64);
    Some(meta)
}

/// A watch event's writes: the object upserted or removed, and the set's synced version.
/// An event's object is checked JSON already (the framer parsed the event, and the filter
/// host checks every replacement), so only its metadata is read.
fn event_ops(set: &SetKey, event: Event, batch: &mut Vec<WriteOp>, metrics: &CacheMetrics) {
    let Ok(meta) = Meta::parse_checked(&event.object) else {
        metrics.unreadable.inc();
        return;
    };
    let key = set.resource.object_key(&meta.namespace, &meta.name);
    let resource_version = meta.resource_version.into_owned();
    match event.kind {
        EventType::Added | EventType::Modified => {
            metrics.bytes.inc_by(event.object.len() as u64);
            if event.kind == EventType::Added {
                batch.push(WriteOp::Entered {
                    set: set.clone(),
                    key: key.clone(),
                    resource_version: resource_version.clone(),
                });
            }
            batch.push(WriteOp::Upsert {
                key,
                object: event.object,
                resource_version: resource_version.clone(),
            });
        }
        EventType::Deleted => batch.push(WriteOp::Remove {
            set: set.clone(),
            key,
            object: event.object,
            resource_version: resource_version.clone(),
        }),
        EventType::Bookmark => {}
        EventType::Error => return,
    }
    if !resource_version.is_empty() {
        batch.push(WriteOp::Synced {
            set: set.clone(),
            resource_version,
        });
    }
}
