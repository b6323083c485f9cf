//! The store's guard: a damaged cache never takes the node down.
//!
//! A cache file can be damaged on an edge node (a failing card, a bad power cut, a stray
//! write), and redb may then panic rather than return an error. The gateway's first job is to
//! forward, so [`GuardedStore`] contains every panic of the store, and when the store is
//! damaged (it cannot be opened, a page is corrupt, it panicked) moves its file aside for
//! diagnosis (`edgegate.redb.damaged-<unix seconds>`), starts a fresh one, logs and counts it
//! (`edgegate_cache_store_resets_total`), and keeps the event for `/v1/readyz`. When not
//! even a fresh file can be created, the cache lives in memory until exit.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use bytes::Bytes;

use super::clock::now;
use super::key::SetKey;
use super::metrics::CacheMetrics;
use super::redb_store::{FILE, RedbStore};
use super::store::{Damage, History, Objects, SetMeta, Store, StoreError, WriteOp};

/// The redb store behind a guard that contains its panics and replaces it when damaged.
pub struct GuardedStore {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    current: ArcSwap<RedbStore>,
    /// Held while a store is replaced, so that readers that find it damaged at once
    /// replace it once.
    replacing: Mutex<Option<Damage>>,
    /// The highest list id any write named: at a replacement, the lists up to it have
    /// staged items in the old store only, and must not commit to the new one.
    lists_seen: AtomicU64,
    /// Lists up to this id began on a replaced store (0: none).
    lists_lost: AtomicU64,
    metrics: CacheMetrics,
}

impl GuardedStore {
    /// Opens the store in `dir`; a store that cannot be opened (damaged, truncated,
    /// unreadable) is moved aside and a fresh one started. Fails only when another process
    /// holds the file: two gateways must not share a cache.
    pub fn open(dir: &Path, metrics: CacheMetrics) -> Result<GuardedStore, StoreError> {
        let mut damage = None;
        let store = match contained(|| RedbStore::open(dir)) {
            Ok(store) => store,
            Err(StoreError::Open { source, .. })
                if matches!(
                    source.downcast_ref::<redb::Error>(),
                    Some(redb::Error::DatabaseAlreadyOpen)
                ) =>
            {
                return Err(StoreError::Open {
                    path: dir.join(FILE),
                    source,
                });
            }
            Err(error) => {
                let (store, event) = replace(dir, &error, None);
                metrics.store_resets.inc();
                damage = Some(event);
                store
            }
        };
        Ok(GuardedStore {
            inner: Arc::new(Inner {
                dir: dir.to_owned(),
                current: ArcSwap::from_pointee(store),
                replacing: Mutex::new(damage),
                lists_seen: AtomicU64::new(0),
                lists_lost: AtomicU64::new(0),
                metrics,
            }),
        })
    }
}

impl Inner {
    /// Runs `read` on the current store with its panics contained; a damaged store is
    /// replaced before the error is returned.
    fn run<T>(
        &self,
        read: impl FnOnce(&RedbStore) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.run_on(&self.current.load_full(), read)
    }

    /// [`Inner::run`] on `store`.
    fn run_on<T>(
        &self,
        store: &Arc<RedbStore>,
        read: impl FnOnce(&RedbStore) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let result = contained(|| read(store));
        if let Err(error) = &result
            && error.is_damage()
        {
            self.replace(store, error);
        }
        result
    }

    /// Replaces `damaged` (unless another caller did already).
    fn replace(&self, damaged: &Arc<RedbStore>, error: &StoreError) {
        let mut last = self.replacing.lock().unwrap_or_else(|p| p.into_inner());
        if !Arc::ptr_eq(&self.current.load(), damaged) {
            return;
        }
        self.lists_lost
            .store(self.lists_seen.load(Ordering::Acquire), Ordering::Release);
        let (store, damage) = replace(&self.dir, error, last.as_ref());
        self.current.store(Arc::new(store));
        self.metrics.store_resets.inc();
        *last = Some(damage);
    }

    /// `ops` without the writes of lists that began on a replaced store (their staged items
    /// went with it: a commit would leave their sets empty), or `None` when none is there.
    fn without_lost_lists(&self, ops: &[WriteOp]) -> Option<Vec<WriteOp>> {
        let list_of = |op: &WriteOp| match op {
            WriteOp::Stage { list, .. }
            | WriteOp::Commit { list, .. }
            | WriteOp::Abort { list } => Some(*list),
            _ => None,
        };
        let highest = ops.iter().filter_map(list_of).max()?;
        self.lists_seen.fetch_max(highest, Ordering::AcqRel);
        let lost = self.lists_lost.load(Ordering::Acquire);
        let is_lost = |op: &WriteOp| list_of(op).is_some_and(|list| list <= lost);
        if !ops.iter().any(is_lost) {
            return None;
        }
        let commits = ops
            .iter()
            .filter(|op| is_lost(op) && matches!(op, WriteOp::Commit { .. }))
            .count();
        self.metrics.aborted.inc_by(commits as u64);
        Some(ops.iter().filter(|op| !is_lost(op)).cloned().collect())
    }
}

/// Moves the store file in `dir` aside and opens a fresh one, or one in memory when that
/// fails too. `before` is the last replacement, if any.
fn replace(dir: &Path, error: &StoreError, before: Option<&Damage>) -> (RedbStore, Damage) {
    let reason = crate::error::error_chain(error);
    let path = dir.join(FILE);
    let stamp = now();
    let mut to = dir.join(format!("{FILE}.damaged-{stamp}"));
    for n in 1.. {
        if !to.exists() {
            break;
        }
        to = dir.join(format!("{FILE}.damaged-{stamp}-{n}"));
    }
    let mut aside = Some(to);
    if let Some(to) = &aside
        && let Err(rename) = std::fs::rename(&path, to)
    {
        if rename.kind() != std::io::ErrorKind::NotFound {
            tracing::error!(error = %rename, path = %path.display(), "cannot move the damaged cache aside");
        }
        aside = None;
    }
    let (store, in_memory) = match contained(|| RedbStore::open(dir)) {
        Ok(store) => (store, false),
        Err(fresh) => {
            tracing::error!(error = %crate::error::error_chain(&fresh), dir = %dir.display(), "cannot start a fresh cache file; caching in memory until exit");
            match RedbStore::in_memory() {
                Ok(store) => (store, true),
                // An in-memory database allocates, nothing else: failing here is a bug.
                Err(error) => panic!("an in-memory cache cannot start: {error}"),
            }
        }
    };
    tracing::error!(
        reason = %reason,
        aside = %aside.as_ref().map_or_else(|| "nowhere".to_owned(), |a| a.display().to_string()),
        in_memory,
        "the cache was damaged; started a fresh one (the gateway keeps forwarding)"
    );
    let damage = Damage {
        resets: before.map_or(1, |d| d.resets + 1),
        at: now(),
        reason,
        aside,
        in_memory,
    };
    (store, damage)
}

/// Runs `f`, turning a panic into [`StoreError::Panicked`].
fn contained<T>(f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        Err(StoreError::Panicked(message))
    })
}

impl Store for GuardedStore {
    fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        self.inner.run(|store| store.get(key))
    }

    fn scan(&self, prefix: &str) -> Result<Objects, StoreError> {
        let store = self.inner.current.load_full();
        let objects = self.inner.run_on(&store, |store| store.scan(prefix))?;
        Ok(Box::new(GuardedObjects {
            inner: self.inner.clone(),
            store,
            objects: Some(objects),
        }))
    }

    fn sets(&self, prefix: &str) -> Result<Vec<(SetKey, SetMeta)>, StoreError> {
        self.inner.run(|store| store.sets(prefix))
    }

    fn components(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.inner.run(|store| store.components())
    }

    fn running_secs(&self) -> Result<u64, StoreError> {
        self.inner.run(|store| store.running_secs())
    }

    fn history(&self, set: &SetKey) -> Result<Vec<(String, History)>, StoreError> {
        self.inner.run(|store| store.history(set))
    }

    fn apply(&self, ops: &[WriteOp], durable: bool) -> Result<bool, StoreError> {
        match self.inner.without_lost_lists(ops) {
            Some(kept) => self.inner.run(|store| store.apply(&kept, durable)),
            None => self.inner.run(|store| store.apply(ops, durable)),
        }
    }

    fn remove_component(&self, component: &str) -> Result<u64, StoreError> {
        self.inner.run(|store| store.remove_component(component))
    }

    fn damage(&self) -> Option<Damage> {
        self.inner
            .replacing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// A scan whose every step is guarded too: the damage may lie in a page it reaches late.
struct GuardedObjects {
    inner: Arc<Inner>,
    /// The store the scan reads, to replace if it is found damaged.
    store: Arc<RedbStore>,
    /// `None` once it failed: a damaged scan ends.
    objects: Option<Objects>,
}

impl Iterator for GuardedObjects {
    type Item = Result<(String, Bytes), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        let objects = self.objects.as_mut()?;
        let next = contained(|| objects.next().transpose()).transpose();
        if let Some(Err(error)) = &next {
            self.objects = None;
            if error.is_damage() {
                self.inner.replace(&self.store, error);
            }
        }
        next
    }
}

#[cfg(test)]
mod tests;
