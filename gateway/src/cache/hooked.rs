//! A store for tests that runs a hook before each write: to make the writer's writes panic,
//! or wait as behind a slow disk.

use bytes::Bytes;

use super::key::SetKey;
use super::redb_store::RedbStore;
use super::store::{
    Applied, History, Objects, SetMeta, Store, StoreError, StoreWriter, VersionClock, WriteOp,
};

/// A redb store that calls `before_apply` before each write it applies.
pub(crate) struct Hooked<H> {
    /// The store read and written.
    pub(crate) store: RedbStore,
    /// Called before each `apply`.
    pub(crate) before_apply: H,
}

impl<H: Fn() + Send + Sync> Store for Hooked<H> {
    fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        self.store.get(key)
    }
    fn scan(&self, prefix: &str) -> Result<Objects, StoreError> {
        self.store.scan(prefix)
    }
    fn sets(&self, prefix: &str) -> Result<Vec<(SetKey, SetMeta)>, StoreError> {
        self.store.sets(prefix)
    }
    fn components(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.store.components()
    }
    fn running_secs(&self) -> Result<u64, StoreError> {
        self.store.running_secs()
    }
    fn version_clock(&self, clock: VersionClock) -> Result<u64, StoreError> {
        self.store.version_clock(clock)
    }
    fn history(&self, set: &SetKey) -> Result<Vec<(String, History)>, StoreError> {
        self.store.history(set)
    }
    fn local_layer(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.store.local_layer()
    }
}

impl<H: Fn() + Send + Sync> StoreWriter for Hooked<H> {
    fn apply(&self, ops: &[WriteOp], durable: bool) -> Result<Applied, StoreError> {
        (self.before_apply)();
        self.store.apply(ops, durable)
    }
    fn remove_component(&self, component: &str) -> Result<u64, StoreError> {
        self.store.remove_component(component)
    }
}
