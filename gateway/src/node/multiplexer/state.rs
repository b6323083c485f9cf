//! One pool-scope resource's shared state: every object as the upstream watch last showed
//! it, the changes of a recent window (what a client's watch resumes from), and the feed
//! of new changes every open watch follows. Objects are held once, as the bytes the
//! apiserver sent; a change shares them with the state, and each client's filters work on
//! their own copies, never on these.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::object::Object;
use super::refilter::LookupLog;
use crate::filter::LookupChange;
use crate::stream::EventType;
use window::Window;

pub use window::{Change, LAG, WINDOW, WINDOW_CHANGES};

/// Where a watch starts.
pub enum Start {
    /// Every current object (as ADDED) at `version`, then the changes after it.
    State {
        /// The objects.
        objects: Vec<Arc<Object>>,
        /// The state's version.
        version: u64,
    },
    /// The window's changes after the client's version.
    Changes(Vec<Arc<Change>>),
}

/// A client's version is older than the window.
#[derive(Debug, thiserror::Error)]
#[error("too old resource version: {asked} ({oldest})")]
pub struct Expired {
    /// The client's version.
    pub asked: u64,
    /// The oldest version the window can resume from.
    pub oldest: u64,
}

/// The state of one resource.
pub struct Shared {
    inner: RwLock<Inner>,
    changes: broadcast::Sender<Arc<Change>>,
    /// The state's version, announced as it moves (lists and watches that want a newer one
    /// wait on it); `None` until the state holds a list.
    version: watch::Sender<Option<u64>>,
    /// The lookup changes of the window, by the state's version when they came.
    lookups: Mutex<LookupLog>,
    /// Set once the resource is no longer pool-scope: its watches end.
    retired: watch::Sender<bool>,
    /// Bumped as data of the feed's list arrives: a slow first list is still coming.
    listing: watch::Sender<u64>,
    /// Set while a page of the feed's list is asked for and its answer has not begun (the
    /// gateway's request timeout bounds that wait), and while a failed page waits to be
    /// asked for again.
    awaiting: Arc<AtomicBool>,
    /// Set while the feed lists, from before its first list.
    underway: Arc<AtomicBool>,
}

struct Inner {
    objects: BTreeMap<String, Arc<Object>>,
    /// The bytes of `objects`.
    bytes: usize,
    /// The changes a watch resumes from.
    window: Window,
    version: u64,
    /// The list's `kind` and `apiVersion`, e.g. `ServiceList` and `v1`.
    list_kind: String,
    api_version: String,
}

/// The identity of a list: its `kind` and `apiVersion`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListType {
    /// E.g. `ServiceList`.
    pub kind: String,
    /// E.g. `v1`, `discovery.k8s.io/v1`.
    pub api_version: String,
}

impl Default for Shared {
    fn default() -> Self {
        Shared::new()
    }
}

impl Shared {
    /// An empty state, not yet listed.
    pub fn new() -> Shared {
        let (changes, _) = broadcast::channel(LAG);
        Shared {
            inner: RwLock::new(Inner {
                objects: BTreeMap::new(),
                bytes: 0,
                window: Window::default(),
                version: 0,
                list_kind: String::new(),
                api_version: String::new(),
            }),
            changes,
            version: watch::channel(None).0,
            lookups: Mutex::default(),
            retired: watch::channel(false).0,
            listing: watch::channel(0).0,
            awaiting: Arc::default(),
            underway: Arc::default(),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        // Every write leaves the state whole before it can panic: take it back.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The state's version, once it holds a list.
    pub fn version(&self) -> Option<u64> {
        *self.version.borrow()
    }

    /// Ends the state's watches: its resource is no longer pool-scope, and nothing feeds it.
    pub fn retire(&self) {
        self.retired.send_replace(true);
    }

    /// Follows whether the state was retired.
    pub fn retired(&self) -> watch::Receiver<bool> {
        self.retired.subscribe()
    }

    /// Follows the state's version.
    pub fn versions(&self) -> watch::Receiver<Option<u64>> {
        self.version.subscribe()
    }

    /// The list's kind and apiVersion.
    pub fn list_type(&self) -> ListType {
        let inner = self.read();
        ListType {
            kind: inner.list_kind.clone(),
            api_version: inner.api_version.clone(),
        }
    }

    /// Replaces the state with a list of `objects` at `version`: the differences become
    /// changes at that version, so open watches see what the list found (objects gone while
    /// no watch ran included), and none of them has to re-list. A held copy newer than the
    /// list's copy of the same object is kept: the cloud never sends an object back in
    /// time, so it is the node's own (the local layer's, from while the cloud was away),
    /// and the list's copy predates what the node wrote; the cloud's next version of it
    /// replaces it, as after a watch resumed.
    pub fn replace(&self, list: ListType, objects: Vec<Object>, version: u64) {
        let now = Instant::now();
        let mut inner = self.write();
        let first = self.version().is_none();
        // A list older than the state (one the gateway's cache answered while the cloud was
        // away) would take it back in time.
        if !first && version < inner.version {
            return;
        }
        if !list.kind.is_empty() {
            inner.list_kind = list.kind;
            inner.api_version = list.api_version;
        }
        let mut fresh: BTreeMap<String, Arc<Object>> = objects
            .into_iter()
            .map(|o| (o.key.clone(), Arc::new(o)))
            .collect();
        let old = std::mem::take(&mut inner.objects);
        for (key, now) in fresh.iter_mut() {
            if let Some(held) = old.get(key).filter(|held| held.version > now.version) {
                *now = held.clone();
            }
        }
        let mut changes = Vec::new();
        let change = |kind, object: &Arc<Object>, previous: Option<Arc<Object>>| Change {
            kind,
            version,
            object: object.clone(),
            previous,
            local: false,
        };
        for (key, now) in &fresh {
            match old.get(key) {
                None => changes.push(change(EventType::Added, now, None)),
                Some(before) if before.version != now.version => {
                    changes.push(change(EventType::Modified, now, Some(before.clone())));
                }
                Some(_) => {}
            }
        }
        for (key, before) in old {
            match fresh.get(&key) {
                // Unchanged: keep the held copy, which older changes share.
                Some(now) if now.version == before.version => {
                    fresh.insert(key, before);
                }
                Some(_) => {}
                None => {
                    // Gone while no watch ran: its deletion is dated by the list.
                    let gone = Arc::new(Object {
                        key: before.key.clone(),
                        namespace: before.namespace.clone(),
                        version,
                        bytes: before.at(version),
                    });
                    changes.push(change(EventType::Deleted, &gone, Some(before)));
                }
            }
        }
        inner.bytes = fresh.values().map(|o| o.bytes.len()).sum();
        inner.objects = fresh;
        inner.version = inner.version.max(version);
        if first {
            inner.window.restart(version);
        } else {
            for change in changes {
                self.record(&mut inner, now, Arc::new(change));
            }
        }
        let version = inner.version;
        drop(inner);
        self.version.send_replace(Some(version));
    }

    /// Applies one watch event; an event older than the state's version is not a change
    /// (a watch resumed from an older version replays what the state holds).
    pub fn apply(&self, kind: EventType, object: Object) {
        self.change(kind, object, false);
    }

    /// Applies one of the node's own changes (the local layer's, while the cloud is away):
    /// as [`Shared::apply`], but one no newer than the state (the local layer found no room
    /// below the cloud's versions) is a change still, dated at the state's version; what the
    /// state already holds, byte for byte, is none.
    pub fn apply_local(&self, kind: EventType, object: Object) {
        self.change(kind, object, true);
    }

    fn change(&self, kind: EventType, object: Object, local: bool) {
        let now = Instant::now();
        let mut inner = self.write();
        let held = inner.objects.get(&object.key);
        let known = match kind {
            EventType::Deleted => held.is_none(),
            _ => held.is_some_and(|held| held.bytes == object.bytes),
        };
        if (!local && object.version <= inner.version) || (local && known) {
            return;
        }
        let version = object.version.max(inner.version);
        let object = Arc::new(object);
        let previous = match kind {
            EventType::Deleted => inner.objects.remove(&object.key),
            EventType::Added | EventType::Modified => {
                inner.bytes += object.bytes.len();
                inner.objects.insert(object.key.clone(), object.clone())
            }
            EventType::Bookmark | EventType::Error => return,
        };
        if let Some(previous) = &previous {
            inner.bytes = inner.bytes.saturating_sub(previous.bytes.len());
        }
        let kind = match (kind, &previous) {
            (EventType::Deleted, _) => EventType::Deleted,
            (_, Some(_)) => EventType::Modified,
            (_, None) => EventType::Added,
        };
        inner.version = version;
        self.record(
            &mut inner,
            now,
            Arc::new(Change {
                kind,
                version,
                object,
                previous,
                local,
            }),
        );
        drop(inner);
        self.version.send_replace(Some(version));
    }

    /// Moves the state's version on without a change (a BOOKMARK).
    pub fn advance(&self, version: u64) {
        let mut inner = self.write();
        if version <= inner.version {
            return;
        }
        inner.version = version;
        inner.window.advance(version);
        drop(inner);
        self.version.send_replace(Some(version));
    }

    fn record(&self, inner: &mut Inner, now: Instant, change: Arc<Change>) {
        inner.window.push(now, change.clone());
        // No receiver is not an error: nobody watches.
        let _ = self.changes.send(change);
    }

    /// The object `key` (`namespace/name`), if the state holds it.
    pub fn get(&self, key: &str) -> Option<Arc<Object>> {
        self.read().objects.get(key).cloned()
    }

    /// Notes a change to what filters look up (`None`: changes were missed), at the state's
    /// version now.
    pub fn note_lookup(&self, change: Option<LookupChange>) {
        let version = self.version().unwrap_or_default();
        let mut log = self.lookups.lock().unwrap_or_else(PoisonError::into_inner);
        log.note((Instant::now(), version), change, (WINDOW, WINDOW_CHANGES));
    }

    /// The lookup changes that came at `since` or later, for a watch resumed from it;
    /// `None` when some are no longer known.
    pub fn lookups_since(&self, since: u64) -> Option<Vec<Option<LookupChange>>> {
        let log = self.lookups.lock().unwrap_or_else(PoisonError::into_inner);
        log.since(since)
    }

    /// The objects of `namespace` (all, if empty) and the state's version.
    pub fn snapshot(&self, namespace: &str) -> (Vec<Arc<Object>>, u64) {
        let inner = self.read();
        let objects = inner
            .objects
            .values()
            .filter(|o| namespace.is_empty() || o.namespace == namespace)
            .cloned()
            .collect();
        (objects, inner.version)
    }

    /// Where a watch from `since` starts (from the current state when `None`), and the
    /// changes that follow it: taken together, so none is missed or seen twice.
    pub fn watch(
        &self,
        since: Option<u64>,
        namespace: &str,
    ) -> Result<(Start, broadcast::Receiver<Arc<Change>>), Expired> {
        let inner = self.read();
        let receiver = self.changes.subscribe();
        let start = match since {
            None => Start::State {
                objects: inner
                    .objects
                    .values()
                    .filter(|o| namespace.is_empty() || o.namespace == namespace)
                    .cloned()
                    .collect(),
                version: inner.version,
            },
            Some(since) if since < inner.window.oldest() => {
                return Err(Expired {
                    asked: since,
                    oldest: inner.window.oldest(),
                });
            }
            Some(since) => Start::Changes(inner.window.since(since)),
        };
        Ok((start, receiver))
    }

    /// How many objects the state holds and their bytes, and the window's changes.
    pub fn size(&self) -> (usize, usize, usize) {
        let inner = self.read();
        (inner.objects.len(), inner.bytes, inner.window.len())
    }
}

/// How a wait for the first list ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// The state holds a list.
    Listed,
    /// No list was under way: it failed, is in its backoff, or never began.
    NoneUnderway,
    /// The list under way brought no data, and had no page awaited, for 30 s.
    Stalled,
}

impl Waited {
    /// Why the wait ended without a list, for the log.
    pub fn reason(self) -> &'static str {
        match self {
            Waited::Listed => "listed",
            Waited::NoneUnderway => "no list under way",
            Waited::Stalled => "the list under way stalled",
        }
    }
}

#[path = "state/window.rs"]
mod window;

#[path = "state/first_list.rs"]
mod first_list;

#[cfg(test)]
#[path = "state/tests.rs"]
mod tests;
