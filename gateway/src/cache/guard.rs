//! The store's guard: a damaged cache or a failing disk never takes the node down.
//!
//! A cache file can be damaged on an edge node (a failing card, a bad power cut, a stray
//! write), and redb may then panic rather than return an error. The gateway's first job is to
//! forward, so [`GuardedStore`] contains every panic of the store, and when the store is
//! damaged (it cannot be opened, a page is corrupt, it panicked) moves its file aside for
//! diagnosis (`edgegate.redb.damaged-<unix seconds>`), starts a fresh one, logs and counts it
//! (`edgegate_cache_store_resets_total`), and keeps the event for `/v1/readyz`. When not
//! even a fresh file can be created, the cache lives in memory until exit.
//!
//! A disk that fails (full, read-only, I/O errors) leaves the file as it was, and redb fails
//! every later write until the file is opened again: the guard closes the store, and opens
//! it again at most once a second while it is used (see `disk`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use bytes::Bytes;

use self::disk::Disk;
use super::clock::now;
use super::key::SetKey;
use super::metrics::CacheMetrics;
use super::redb_store::{FILE, RedbStore};
use super::store::{
    Applied, Damage, Fault, History, Objects, SetMeta, Store, StoreError, StoreWriter,
    VersionClock, WriteOp,
};

/// How a store file is opened: [`RedbStore::open`], or in tests one over a faulty disk.
type Opener = Box<dyn Fn(&Path) -> Result<RedbStore, StoreError> + Send + Sync>;

/// The redb store behind a guard that contains its panics and replaces it when damaged.
pub struct GuardedStore {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    open: Opener,
    /// The store; `None` while it is closed for a disk fault.
    current: ArcSwapOption<RedbStore>,
    /// Held while a store is replaced, closed or opened again, so that readers that find it
    /// damaged at once replace it once.
    replacing: Mutex<Option<Damage>>,
    /// The highest list id any write named: at a replacement, the lists up to it have
    /// staged items in the old store only, and must not commit to the new one.
    lists_seen: AtomicU64,
    /// Lists up to this id began on a replaced store (0: none).
    lists_lost: AtomicU64,
    /// The address of the store last closed for a disk fault, while it is closed (0: none).
    closed: AtomicUsize,
    disk: Disk,
    metrics: CacheMetrics,
}

impl GuardedStore {
    /// Opens the store in `dir`; a store that cannot be opened (damaged, truncated,
    /// unreadable) is moved aside and a fresh one started, one whose disk fails (full,
    /// read-only) is left as it is and opened once the disk works. Fails only when another
    /// process holds the file: two gateways must not share a cache.
    pub fn open(dir: &Path, metrics: CacheMetrics) -> Result<GuardedStore, StoreError> {
        GuardedStore::open_with(dir, metrics, Box::new(RedbStore::open))
    }

    /// [`GuardedStore::open`], opening the file with `open`.
    fn open_with(
        dir: &Path,
        metrics: CacheMetrics,
        open: Opener,
    ) -> Result<GuardedStore, StoreError> {
        let mut damage = None;
        let disk = Disk::default();
        let store = match contained(|| open(dir)) {
            Ok(store) => Some(store),
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
            // A full or read-only disk says nothing of the file: moving it aside would throw
            // away a cache the node may need offline. (Other I/O errors at open may be the
            // file's own, as a directory in its place: it is moved aside.)
            Err(error) if matches!(error.disk_fault(), Some("full" | "read_only")) => {
                disk.began(&error, &metrics);
                None
            }
            Err(error) => {
                let (store, event) = replace(dir, &open, &error, None);
                metrics.store_resets.inc();
                damage = Some(event);
                Some(store)
            }
        };
        Ok(GuardedStore {
            inner: Arc::new(Inner {
                dir: dir.to_owned(),
                open,
                current: ArcSwapOption::from(store.map(Arc::new)),
                replacing: Mutex::new(damage),
                lists_seen: AtomicU64::new(0),
                lists_lost: AtomicU64::new(0),
                closed: AtomicUsize::new(0),
                disk,
                metrics,
            }),
        })
    }
}

impl Inner {
    /// The current store, opened again first when it is closed for a disk fault and a
    /// retry is due; `None` while it stays closed.
    fn store(&self) -> Option<Arc<RedbStore>> {
        if let Some(store) = self.current.load_full() {
            return Some(store);
        }
        self.reopen();
        self.current.load_full()
    }

    /// Runs `read` on the current store with its panics contained; a damaged store is
    /// replaced, and a failing disk closes it, before the error is returned.
    fn run<T>(
        &self,
        read: impl FnOnce(&RedbStore) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let store = self.store().ok_or(StoreError::Unavailable)?;
        self.run_on(&store, read)
    }

    /// [`Inner::run`] on `store`.
    fn run_on<T>(
        &self,
        store: &Arc<RedbStore>,
        read: impl FnOnce(&RedbStore) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let result = contained(|| read(store));
        if let Err(error) = &result {
            self.failed(store, error);
        }
        result
    }

    /// Replaces a damaged `store`, or closes it when its disk failed.
    fn failed(&self, store: &Arc<RedbStore>, error: &StoreError) {
        if error.is_damage() {
            self.replace(store, error);
        } else if error.disk_fault().is_some() {
            self.close(store, error);
        }
    }

    /// Whether `store` is the current one.
    fn is_current(&self, store: &Arc<RedbStore>) -> bool {
        self.current
            .load()
            .as_ref()
            .is_some_and(|current| Arc::ptr_eq(current, store))
    }

    /// Replaces `damaged` (unless another caller did already), also when it was closed
    /// meanwhile: redb fails every operation after a failed read, a read past a truncated
    /// file's end too, and a concurrent one may have closed it for a disk fault first.
    fn replace(&self, damaged: &Arc<RedbStore>, error: &StoreError) {
        let mut last = self.replacing.lock().unwrap_or_else(|p| p.into_inner());
        // `damaged` is alive, so no other store has its address.
        let closed = self.current.load().is_none()
            && self.closed.load(Ordering::Acquire) == Arc::as_ptr(damaged) as usize;
        if !self.is_current(damaged) && !closed {
            return;
        }
        self.lists_lost
            .store(self.lists_seen.load(Ordering::Acquire), Ordering::Release);
        let (store, damage) = replace(&self.dir, &self.open, error, last.as_ref());
        self.current.store(Some(Arc::new(store)));
        self.metrics.store_resets.inc();
        *last = Some(damage);
    }

    /// Closes `failing` (unless another caller did already): redb fails every write after
    /// an I/O error until the file is opened again, and the file's lock is free for that
    /// once the readers holding it are done. Opening it again goes back to its last durable
    /// commit: every set is the one a list committed or a watch synced, never a mix.
    fn close(&self, failing: &Arc<RedbStore>, error: &StoreError) {
        let _replacing = self.replacing.lock().unwrap_or_else(|p| p.into_inner());
        if !self.is_current(failing) {
            return;
        }
        // Items staged in the lost transactions, or since, are gone: such lists must not
        // commit a part of their sets.
        self.lists_lost
            .store(self.lists_seen.load(Ordering::Acquire), Ordering::Release);
        self.current.store(None);
        self.closed
            .store(Arc::as_ptr(failing) as usize, Ordering::Release);
        self.disk.began(error, &self.metrics);
    }

    /// Opens the closed store again, when a retry is due.
    fn reopen(&self) {
        let mut last = self.replacing.lock().unwrap_or_else(|p| p.into_inner());
        if self.current.load().is_some() || !self.disk.retry_due() {
            return;
        }
        match contained(|| (self.open)(&self.dir)) {
            // The fault ends at the first durable write that works (see `Disk::applied`).
            Ok(store) => self.current.store(Some(Arc::new(store))),
            Err(error) if error.is_damage() => {
                let (store, damage) = replace(&self.dir, &self.open, &error, last.as_ref());
                self.current.store(Some(Arc::new(store)));
                self.metrics.store_resets.inc();
                *last = Some(damage);
            }
            Err(error) => {
                tracing::debug!(error = %crate::error::error_chain(&error), "the cache disk still fails");
            }
        }
    }

    /// [`StoreWriter::apply`], first marking stale each set a disk fault may have left a hole in.
    fn write(&self, ops: &[WriteOp], durable: bool) -> Result<Applied, StoreError> {
        let Some(store) = self.store() else {
            self.lost(ops);
            return Err(StoreError::Unavailable);
        };
        let stale = self.disk.take_stale();
        let result = if stale.is_empty() {
            self.run_on(&store, |store| store.apply(ops, durable))
        } else {
            let mut marked: Vec<WriteOp> = stale
                .iter()
                .map(|set| WriteOp::Lost { set: set.clone() })
                .collect();
            marked.extend_from_slice(ops);
            self.run_on(&store, |store| store.apply(&marked, true))
        };
        match &result {
            Ok(_) => self.disk.applied(ops, durable || !stale.is_empty()),
            Err(_) => {
                self.disk.keep_stale(stale);
                self.lost(ops);
            }
        }
        result
    }

    /// `ops` were not applied: their lists cannot commit whole, and their sets miss what
    /// their watches brought.
    fn lost(&self, ops: &[WriteOp]) {
        self.lists_lost
            .store(self.lists_seen.load(Ordering::Acquire), Ordering::Release);
        self.disk.lost(ops);
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

/// Moves the store file in `dir` aside and opens a fresh one with `open`, or one in memory
/// when that fails too. `before` is the last replacement, if any.
fn replace(
    dir: &Path,
    open: &Opener,
    error: &StoreError,
    before: Option<&Damage>,
) -> (RedbStore, Damage) {
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
    let (store, in_memory) = match contained(|| open(dir)) {
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
        let store = self.inner.store().ok_or(StoreError::Unavailable)?;
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

    fn version_clock(&self, clock: VersionClock) -> Result<u64, StoreError> {
        self.inner.run(|store| store.version_clock(clock))
    }

    fn history(&self, set: &SetKey) -> Result<Vec<(String, History)>, StoreError> {
        self.inner.run(|store| store.history(set))
    }

    fn local_layer(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.inner.run(|store| store.local_layer())
    }

    fn damage(&self) -> Option<Damage> {
        self.inner
            .replacing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn fault(&self) -> Option<Fault> {
        // Asked by `/v1/readyz`: a disk that works again is noticed there too, not only at
        // the next write.
        if self.inner.disk.fault().is_some() {
            self.inner.store();
        }
        self.inner.disk.fault()
    }
}

impl StoreWriter for GuardedStore {
    fn apply(&self, ops: &[WriteOp], durable: bool) -> Result<Applied, StoreError> {
        match self.inner.without_lost_lists(ops) {
            Some(kept) => self.inner.write(&kept, durable),
            None => self.inner.write(ops, durable),
        }
    }
    fn remove_component(&self, component: &str) -> Result<u64, StoreError> {
        self.inner.run(|store| store.remove_component(component))
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
            self.inner.failed(&self.store, error);
        }
        next
    }
}

mod disk;
#[cfg(test)]
mod tests;
