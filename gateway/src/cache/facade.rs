//! The cache as the rest of the gateway sees it: what is cached (the policy), the store for
//! readers, tees for responses, and the components' uses garbage collection asks about. What
//! the tees feed goes to the one writer, which this starts and closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::clock::RunningClock;
use super::key::{ResourceKey, SetKey};
use super::local_layer::{self, LOCAL_LAYER_BYTES, LocalLayer, LocalWriteError};
use super::message::Message;
use super::metrics::CacheMetrics;
use super::policy::{CachePolicy, CacheTarget};
use super::store::{Store, StoreError, StoreWriter, VersionClock, WriteOp};
use super::tee::{ListTee, ObjectTee, Tee, TeeLink, WatchTee};
use super::usage::{Serving, UseLog};
use super::writer::{Clocks, Writer};
use crate::stream::Event;

/// How many of the node's own changes an offline watch may be behind before it is ended
/// (its client then resumes from its last version, from the store).
const LOCAL_CHANGES_QUEUED: usize = 1024;

/// A change the node made to one of its own objects while the cloud was away, as one
/// component's copy of it shows: that component's offline watches send it.
#[derive(Clone, Debug)]
pub struct LocalChange {
    /// The resource, for the component whose copy changed.
    pub resource: ResourceKey,
    /// The object's namespace (empty for a Node).
    pub namespace: String,
    /// The change as a watch event of that copy.
    pub event: Event,
}

/// Longest a read of the cache waits for the writer to apply what was sent before it
/// ([`Cache::caught_up`]): a stuck disk must not hold offline answers back for good.
const CAUGHT_UP_WITHIN: Duration = Duration::from_secs(5);

/// The cache: its policy, its store for readers, and the tees into its writer.
pub struct Cache {
    /// What is cached now: the agents it started with and those `yurt-hub-cfg` adds.
    policy: ArcSwap<CachePolicy>,
    /// The agents it started with (defaults and `--cache-agents`).
    base_agents: Vec<String>,
    store: Arc<dyn Store>,
    clock: Arc<RunningClock>,
    uses: Arc<UseLog>,
    metrics: CacheMetrics,
    writer: Writer,
    /// The highest resourceVersion the cloud was seen at (see [`Cache::saw_cloud_version`]).
    cloud: Arc<AtomicU64>,
    /// The highest resourceVersion given to one of the node's own writes (persisted).
    local_clock: AtomicU64,
    /// The node's own changes, for offline watches.
    local: tokio::sync::broadcast::Sender<Arc<LocalChange>>,
    /// Most bytes the node's own objects may hold in the store.
    local_limit: AtomicU64,
}

impl Cache {
    /// Starts the writer over `store`, to which it alone keeps the write half; every other
    /// part of the gateway reads it through [`Cache::store`].
    pub fn start(
        store: Arc<dyn StoreWriter>,
        policy: CachePolicy,
        metrics: CacheMetrics,
    ) -> Arc<Cache> {
        let base_agents = policy.agents();
        let base = store.running_secs().unwrap_or_else(|error| {
            tracing::warn!(error = %crate::error::error_chain(&error), "cannot read the gateway's running time; counting from zero");
            0
        });
        let clock = Arc::new(RunningClock::new(base));
        let stored = |clock| store.version_clock(clock).unwrap_or(0);
        let cloud = Arc::new(AtomicU64::new(stored(VersionClock::Cloud)));
        let local_clock = AtomicU64::new(stored(VersionClock::Local));
        let clocks = Clocks {
            running: clock.clone(),
            cloud: cloud.clone(),
        };
        // What the node wrote before a restart while cut, in the gauges from the start.
        if let Err(error) = local_layer::measure(store.as_ref(), &metrics) {
            tracing::debug!(error = %crate::error::error_chain(&error), "cannot read the local layer");
        }
        let writer = Writer::start(store.clone(), metrics.clone(), clocks);
        let store: Arc<dyn Store> = store;
        let uses = Arc::new(UseLog::new(clock.clone(), writer.outbox().clone()));
        Arc::new(Cache {
            policy: ArcSwap::from_pointee(policy),
            base_agents,
            store,
            clock,
            uses,
            metrics,
            writer,
            cloud,
            local_clock,
            local: tokio::sync::broadcast::channel(LOCAL_CHANGES_QUEUED).0,
            local_limit: AtomicU64::new(LOCAL_LAYER_BYTES),
        })
    }

    /// The clock of the cloud's resourceVersions, for the heartbeat to advance
    /// ([`Cache::saw_cloud_version`] by another way).
    pub fn cloud_clock(&self) -> Arc<AtomicU64> {
        self.cloud.clone()
    }

    /// Notes that the cloud answered at resourceVersion `version` (the heartbeat's lease
    /// renewals): versions given to the node's own writes never pass the highest seen.
    pub fn saw_cloud_version(&self, version: u64) {
        self.cloud.fetch_max(version, Ordering::Relaxed);
    }

    /// The highest resourceVersion the cloud was seen at: by the heartbeat, or in what the
    /// store holds (its stored clock, its sets' versions).
    pub fn cloud_version(&self) -> u64 {
        let sets = self.store.sets("").unwrap_or_default();
        sets.iter()
            .filter_map(|(_, meta)| meta.resource_version.parse::<u64>().ok())
            .chain([self.cloud.load(Ordering::Relaxed)])
            .max()
            .unwrap_or(0)
    }

    /// The highest resourceVersion a set of `resource` (of `group`, in any version, for any
    /// component) was synced at: a local write of one of its objects must be newer, or a
    /// watch resumed from the set's version would not send it.
    pub fn listed_version(&self, group: &str, resource: &str) -> u64 {
        let sets = self.store.sets("").unwrap_or_default();
        sets.iter()
            .filter(|(set, _)| set.resource.group == group && set.resource.resource == resource)
            .filter_map(|(_, meta)| meta.resource_version.parse::<u64>().ok())
            .max()
            .unwrap_or(0)
    }

    /// The lowest version of the node's own writes in `set` its cloud has not seen (see
    /// [`SetMeta::own_writes_from`]); `None` when there are none, or the set is not cached.
    ///
    /// [`SetMeta::own_writes_from`]: super::store::SetMeta::own_writes_from
    pub fn own_writes_from(&self, set: &SetKey) -> Option<String> {
        let encoded = set.encode();
        let sets = self.store.sets(&encoded).ok()?;
        let (_, meta) = sets.into_iter().find(|(found, _)| found == set)?;
        Some(meta.own_writes_from).filter(|from| !from.is_empty())
    }

    /// The highest resourceVersion given to the node's own writes (0 before the first).
    pub fn last_local_version(&self) -> u64 {
        self.local_clock.load(Ordering::Relaxed)
    }

    /// The resourceVersion the node's next own write of an object takes, newer than `floor`
    /// (its object's and its sets' versions): one past both `floor` and every version given
    /// locally before, but never past the cloud's ([`Cache::cloud_version`]), so what the
    /// cloud sends later is newer still. With no room left, the highest of them, unchanged.
    pub fn next_local_version(&self, floor: u64) -> u64 {
        let cloud = self.cloud_version();
        let next = |last: u64| {
            let base = floor.max(last);
            if base < cloud { base + 1 } else { base }
        };
        let previous = self
            .local_clock
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                Some(next(last))
            })
            .unwrap_or_else(|last| last);
        next(previous)
    }

    /// Applies the node's own writes (`ops`) in one durable transaction, marking the
    /// objects they store as the node's, then sends `changes` to the offline watches; an
    /// error says why the store did not take them (one is a bound on what they may hold).
    pub async fn write_local(
        &self,
        mut ops: Vec<WriteOp>,
        changes: Vec<LocalChange>,
    ) -> Result<(), LocalWriteError> {
        let limit = self.local_limit.load(Ordering::Relaxed);
        let layer = local_layer::admit(self.store.as_ref(), &self.metrics, &mut ops, limit)?;
        for (clock, version) in [
            (VersionClock::Cloud, self.cloud.load(Ordering::Relaxed)),
            (
                VersionClock::Local,
                self.local_clock.load(Ordering::Relaxed),
            ),
        ] {
            if version > 0 {
                ops.push(WriteOp::VersionClock { clock, version });
            }
        }
        let (done, outcome) = tokio::sync::oneshot::channel();
        if !self.writer.outbox().send(Message::Local { ops, done }) {
            return Err(LocalWriteError::Store(
                "the cache writer is gone".to_owned(),
            ));
        }
        outcome
            .await
            .map_err(|_| LocalWriteError::Store("the cache writer stopped".to_owned()))?
            .map_err(LocalWriteError::Store)?;
        local_layer::show(&self.metrics, layer);
        for change in changes {
            // None listening is no error: no offline watch is open.
            let _ = self.local.send(Arc::new(change));
        }
        Ok(())
    }

    /// What the node's own writes hold in the store now, also shown in `/metrics`.
    pub fn local_layer(&self) -> Result<LocalLayer, StoreError> {
        local_layer::measure(self.store.as_ref(), &self.metrics).map(|(layer, _)| layer)
    }

    /// Reads the local layer's gauges again if they show anything: the cloud's newer
    /// versions replace the node's objects, and nothing else adds to the layer.
    pub fn refresh_local_layer(&self) {
        if self.metrics.local_objects.get() == 0 {
            return;
        }
        if let Err(error) = self.local_layer() {
            tracing::debug!(error = %crate::error::error_chain(&error), "cannot read the local layer");
        }
    }

    /// Bounds what the node's own objects may hold in the store at `bytes`.
    #[cfg(test)]
    pub(crate) fn set_local_limit(&self, bytes: u64) {
        self.local_limit.store(bytes, Ordering::Relaxed);
    }

    /// The node's own changes from now on, for an offline watch.
    pub fn local_changes(&self) -> tokio::sync::broadcast::Receiver<Arc<LocalChange>> {
        self.local.subscribe()
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

    /// A tee for the response to `target`, of the kind it names; `None` for a later page of
    /// a list whose earlier pages were not seen (it could never be committed whole).
    pub fn tee(&self, target: CacheTarget) -> Option<Tee> {
        Some(match target {
            CacheTarget::List { set, continue_from } => {
                Tee::List(self.list_tee(set, continue_from)?)
            }
            CacheTarget::Watch(set) => Tee::Watch(self.watch_tee(set)),
            CacheTarget::Object(resource) => Tee::Object(self.object_tee(resource)),
        })
    }

    /// A tee for a list page of `set`: its first when `continue_from` is `None`, else the
    /// page that token asks for (`None` when its list's earlier pages were not seen).
    pub fn list_tee(&self, set: SetKey, continue_from: Option<String>) -> Option<ListTee> {
        let serving = self.uses.serving(&set.resource.component);
        let (list, items) = match continue_from {
            None => (self.writer.new_list(), 0),
            Some(token) => self.writer.pages().resume(&token)?,
        };
        let paced = !self.holds(&set);
        let link = self.link(Some(serving));
        let pages = self.writer.pages().clone();
        Some(ListTee::new(link, pages, list, items, set, paced))
    }

    /// A tee for a watch of `set`.
    pub fn watch_tee(&self, set: SetKey) -> WatchTee {
        let serving = self.uses.serving(&set.resource.component);
        WatchTee::new(self.link(Some(serving)), set)
    }

    /// A tee for a single object of `resource`.
    pub fn object_tee(&self, resource: ResourceKey) -> ObjectTee {
        let serving = self.uses.serving(&resource.component);
        ObjectTee::new(self.link(Some(serving)), resource)
    }

    /// A response for `target` that is not cached after all (an error, a protobuf answer):
    /// nothing to tee, but a later page of a list ends that list, uncommitted.
    pub fn skip_response(&self, target: CacheTarget) {
        if let CacheTarget::List {
            set,
            continue_from: Some(token),
        } = target
            && let Some((list, items)) = self.writer.pages().resume(&token)
        {
            let pages = self.writer.pages().clone();
            // Dropped before its end: the list is aborted, as any list that breaks off.
            drop(ListTee::new(
                self.link(None),
                pages,
                list,
                items,
                set,
                false,
            ));
        }
    }

    /// Seconds the gateway has run over this store: the clock of components' last uses.
    pub fn running_secs(&self) -> u64 {
        self.clock.secs()
    }

    /// Tells the cache that components unused for `after` are collected: a component in
    /// use must have a last use written well within that, however short it is.
    pub fn collect_after(&self, after: Duration) {
        self.uses.usage.collect_after(after);
    }

    /// Records that `component` was served (for garbage collection).
    pub fn touch(&self, component: &str) {
        self.uses.note(component, 0);
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
        self.uses
            .usage
            .collect_unused(component, written, cutoff, remove)
    }

    /// Removes everything cached for `component`, through the writer, after what was sent
    /// to it before; how many objects went. Blocks: for garbage collection's thread.
    pub(crate) fn remove_component(&self, component: &str) -> Result<u64, StoreError> {
        let (done, outcome) = std::sync::mpsc::channel();
        let component = component.to_owned();
        if !self
            .writer
            .outbox()
            .send(Message::Collect { component, done })
        {
            return Err(StoreError::Unavailable);
        }
        outcome.recv().unwrap_or(Err(StoreError::Unavailable))
    }

    /// Waits (at most `CAUGHT_UP_WITHIN`) until what every tee has sent so far is in the
    /// store for its readers: a response from the cache then holds everything the gateway
    /// has already sent a client. Without it, a client that saw an object deleted and
    /// re-listed from the cache just after could see it again.
    pub async fn caught_up(&self) {
        if tokio::time::timeout(CAUGHT_UP_WITHIN, self.applied())
            .await
            .is_err()
        {
            tracing::debug!("the cache writer is behind; answering from what the store holds");
        }
    }

    /// Resolves once what every tee has sent so far is in the store for its readers
    /// ([`Cache::caught_up`] without its bound).
    pub(crate) fn applied(&self) -> impl Future<Output = ()> + use<> {
        let applied = self.writer.applied();
        async move {
            // A writer gone (or never started) applies nothing more: the store is as it is.
            let _ = applied.await;
        }
    }

    /// Blocks until everything sent so far is durable. For shutdown and tests.
    pub fn flush(&self) {
        self.writer.flush();
    }

    /// Flushes and stops the writer.
    pub fn close(&self) {
        self.writer
            .outbox()
            .send(Message::Running(self.running_secs()));
        let version = self.cloud.load(Ordering::Relaxed);
        if version > 0 {
            let (done, _) = tokio::sync::oneshot::channel();
            let ops = vec![WriteOp::VersionClock {
                clock: VersionClock::Cloud,
                version,
            }];
            self.writer.outbox().send(Message::Local { ops, done });
        }
        self.writer.close();
    }

    /// The in-flight budget, to take in tests as a writer that has fallen behind leaves it.
    #[cfg(test)]
    pub(crate) fn budget(&self) -> &super::budget::Budget {
        self.writer.budget()
    }

    /// A tee's link to the writer, keeping `serving` open while the tee lives.
    fn link(&self, serving: Option<Serving>) -> TeeLink {
        TeeLink::new(
            self.writer.outbox().clone(),
            self.writer.budget().clone(),
            self.metrics.clone(),
            serving,
        )
    }

    /// Whether the store holds a committed list of `set` (unreadable counts as no).
    fn holds(&self, set: &SetKey) -> bool {
        self.store
            .sets(&set.encode())
            .is_ok_and(|sets| sets.iter().any(|(held, _)| held == set))
    }
}

#[cfg(test)]
mod tests;
