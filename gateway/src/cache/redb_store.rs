//! The default store: one redb file, crash-safe (copy-on-write B-trees, checksummed commits).
//!
//! A list's items are staged in their own table as they stream (non-durable commits, so
//! staging costs no fsync), and one durable transaction moves them in and removes the set's
//! stale members. redb recovers to the last durable commit, and every commit is atomic, so a
//! kill at any moment leaves each set as its old list or its new one; staging left by a crash
//! is cleared at open.
//!
//! Most re-lists bring back what the set already holds, so an item whose bytes equal the
//! stored object is staged as a bare key ([`UNCHANGED`]) and left where it is at commit:
//! a re-list of an unchanged set writes its keys, not its objects, twice. Each object's
//! [`Digest`] is kept beside it, so that a re-list compares its items, and finds the set's
//! members to replace, without reading the stored objects.

use std::path::Path;

use bytes::Bytes;
use redb::{Database, Durability, ReadableDatabase, ReadableTable};

use self::history::{HISTORY, Tables};
use self::local_marks::LOCAL;
use self::sets::{abort, commit, mark_own_write, mark_stale, stage, sync};
use self::tables::{
    CLOCKS, COMPONENTS, DIGESTS, OBJECTS, RUNNING, SETS, STAGING, clock_name, engine, prefix_end,
};
use self::unchanged::upsert;
use super::key::SetKey;
use super::store::{
    Applied, History, Objects, SetMeta, Store, StoreError, StoreWriter, VersionClock, WriteOp,
};
use crate::stream::compare_versions;

/// Page cache of the database. Offline reads are rare and the kernel's page cache backs the
/// file anyway. The cache fills on the first large list and stays, so it counts against the
/// memory bound of streaming a list: at 1 MiB rather than 4 MiB the first large list grows
/// RSS less, for slightly slower commits (measured: benches/HISTORY.md, "Measurements
/// behind choices in the code").
const CACHE_BYTES: usize = 1 << 20;

/// The database file's name in the cache directory.
pub const FILE: &str = "edgegate.redb";

/// The redb store.
pub struct RedbStore {
    db: Database,
}

impl RedbStore {
    /// Opens (or creates) the store in `dir`, as the file `edgegate.redb`. A file that cannot be
    /// opened is an error here; [`super::GuardedStore`] moves it aside and starts anew.
    pub fn open(dir: &Path) -> Result<RedbStore, StoreError> {
        let open_error = |source: Box<dyn std::error::Error + Send + Sync>| StoreError::Open {
            path: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(|e| open_error(Box::new(e)))?;
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(dir.join(FILE))
            .map_err(|e| open_error(Box::new(redb::Error::from(e))))?;
        let store = RedbStore { db };
        store.init()?;
        Ok(store)
    }

    /// A store in memory only, for when no file can be opened or created: lost at exit.
    pub fn in_memory() -> Result<RedbStore, StoreError> {
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(engine)?;
        let store = RedbStore { db };
        store.init()?;
        Ok(store)
    }

    /// A store over `backend`: tests give it a disk that fails on demand.
    #[cfg(test)]
    pub(crate) fn with_backend(
        backend: impl redb::StorageBackend,
    ) -> Result<RedbStore, StoreError> {
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create_with_backend(backend)
            .map_err(|e| StoreError::Open {
                path: std::path::PathBuf::new(),
                source: Box::new(redb::Error::from(e)),
            })?;
        let store = RedbStore { db };
        store.init()?;
        Ok(store)
    }

    /// Removes the running clock, as a store written before it was kept lacks it.
    #[cfg(test)]
    pub(crate) fn forget_running_clock(&self) {
        let txn = self.db.begin_write().expect("a write transaction");
        txn.delete_table(CLOCKS).expect("the clocks table");
        txn.commit().expect("a commit");
    }

    /// Creates the tables and clears staging left by a crash.
    fn init(&self) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(engine)?;
        {
            let objects = txn.open_table(OBJECTS).map_err(engine)?;
            let mut digests = txn.open_table(DIGESTS).map_err(engine)?;
            digest::complete(&objects, &mut digests)?;
            txn.open_table(SETS).map_err(engine)?;
            txn.open_table(HISTORY).map_err(engine)?;
            txn.open_table(LOCAL).map_err(engine)?;
            let mut components = txn.open_table(COMPONENTS).map_err(engine)?;
            let mut clocks = txn.open_table(CLOCKS).map_err(engine)?;
            if clocks.get(RUNNING).map_err(engine)?.is_none() {
                // A store written before the running clock kept wall-clock last uses: the
                // components count as used when the clock starts.
                clocks.insert(RUNNING, 0).map_err(engine)?;
                let names: Vec<String> = components
                    .iter()
                    .map_err(engine)?
                    .map(|entry| entry.map(|(k, _)| k.value().to_owned()).map_err(engine))
                    .collect::<Result<_, _>>()?;
                for name in names {
                    components.insert(name.as_str(), 0).map_err(engine)?;
                }
            }
            let mut staging = txn.open_table(STAGING).map_err(engine)?;
            staging.retain(|_, _| false).map_err(engine)?;
        }
        txn.commit().map_err(engine)
    }
}

impl Store for RedbStore {
    fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError> {
        let txn = self.db.begin_read().map_err(engine)?;
        let table = txn.open_table(OBJECTS).map_err(engine)?;
        let Some(value) = table.get(key).map_err(engine)? else {
            return Ok(None);
        };
        let digests = txn.open_table(DIGESTS).map_err(engine)?;
        let digest = digests.get(key).map_err(engine)?.map(|d| (key, d.value()));
        digest::verified(key, value.value(), digest).map(Some)
    }

    fn scan(&self, prefix: &str) -> Result<Objects, StoreError> {
        let txn = self.db.begin_read().map_err(engine)?;
        let table = txn.open_table(OBJECTS).map_err(engine)?;
        let digests = txn.open_table(DIGESTS).map_err(engine)?;
        let end = prefix_end(prefix);
        let range = table.range(prefix..end.as_str()).map_err(engine)?;
        // The digests table holds exactly the objects' keys: walked beside the objects, it
        // gives each one's digest in step.
        let mut digests = digests.range(prefix..end.as_str()).map_err(engine)?;
        Ok(Box::new(range.map(move |entry| {
            let (key, value) = entry.map_err(engine)?;
            let key = key.value();
            let digest = digests.next().transpose().map_err(engine)?;
            let digest = digest.as_ref().map(|(k, d)| (k.value(), d.value()));
            let object = digest::verified(key, value.value(), digest)?;
            Ok((key.to_owned(), object))
        })))
    }

    fn sets(&self, prefix: &str) -> Result<Vec<(SetKey, SetMeta)>, StoreError> {
        let txn = self.db.begin_read().map_err(engine)?;
        let table = txn.open_table(SETS).map_err(engine)?;
        let end = prefix_end(prefix);
        let mut sets = Vec::new();
        for entry in table.range(prefix..end.as_str()).map_err(engine)? {
            let (key, value) = entry.map_err(engine)?;
            let set = SetKey::decode(key.value())
                .ok_or_else(|| StoreError::Corrupt(key.value().to_owned()))?;
            let meta = serde_json::from_slice(value.value())
                .map_err(|_| StoreError::Corrupt(key.value().to_owned()))?;
            sets.push((set, meta));
        }
        Ok(sets)
    }

    fn components(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let txn = self.db.begin_read().map_err(engine)?;
        let table = txn.open_table(COMPONENTS).map_err(engine)?;
        table
            .iter()
            .map_err(engine)?
            .map(|entry| {
                let (k, v) = entry.map_err(engine)?;
                Ok((k.value().to_owned(), v.value()))
            })
            .collect()
    }

    fn running_secs(&self) -> Result<u64, StoreError> {
        let txn = self.db.begin_read().map_err(engine)?;
        let clocks = txn.open_table(CLOCKS).map_err(engine)?;
        Ok(clocks
            .get(RUNNING)
            .map_err(engine)?
            .map_or(0, |v| v.value()))
    }

    fn version_clock(&self, clock: VersionClock) -> Result<u64, StoreError> {
        let txn = self.db.begin_read().map_err(engine)?;
        let clocks = txn.open_table(CLOCKS).map_err(engine)?;
        let name = clock_name(clock);
        Ok(clocks.get(name).map_err(engine)?.map_or(0, |v| v.value()))
    }

    fn history(&self, set: &SetKey) -> Result<Vec<(String, History)>, StoreError> {
        let txn = self.db.begin_read().map_err(engine)?;
        let table = txn.open_table(HISTORY).map_err(engine)?;
        let encoded = set.encode();
        let (from, end) = history::bounds(&encoded);
        let mut entries = Vec::new();
        for entry in table.range(from..(end.as_str(), "")).map_err(engine)? {
            let (key, value) = entry.map_err(engine)?;
            let key = key.value().1;
            let entry = history::decode(value.value())
                .ok_or_else(|| StoreError::Corrupt(format!("{encoded} {key}")))?;
            entries.push((key.to_owned(), entry));
        }
        Ok(entries)
    }

    fn local_layer(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let txn = self.db.begin_read().map_err(engine)?;
        let local = txn.open_table(LOCAL).map_err(engine)?;
        let digests = txn.open_table(DIGESTS).map_err(engine)?;
        local_marks::live(&local, &digests)
    }
}

impl StoreWriter for RedbStore {
    fn apply(&self, ops: &[WriteOp], durable: bool) -> Result<Applied, StoreError> {
        if !durable && unchanged::changes_nothing(&self.db, ops)? {
            return Ok(Applied::default());
        }
        let mut unreadable = 0;
        let mut txn = self.db.begin_write().map_err(engine)?;
        let durability = if durable {
            Durability::Immediate
        } else {
            Durability::None
        };
        txn.set_durability(durability).map_err(engine)?;
        {
            let mut objects = txn.open_table(OBJECTS).map_err(engine)?;
            let mut digests = txn.open_table(DIGESTS).map_err(engine)?;
            let mut staging = txn.open_table(STAGING).map_err(engine)?;
            let mut sets = txn.open_table(SETS).map_err(engine)?;
            let mut components = txn.open_table(COMPONENTS).map_err(engine)?;
            let mut history = txn.open_table(HISTORY).map_err(engine)?;
            let mut clocks = txn.open_table(CLOCKS).map_err(engine)?;
            let mut local = txn.open_table(LOCAL).map_err(engine)?;
            let mut marked = false;
            // The version the last set synced in this transaction is at: the watches of
            // one set each sync it to the same versions, and only the first moves it.
            let mut synced: Option<(&SetKey, &str)> = None;
            for op in ops {
                match op {
                    WriteOp::Stage { list, key, object } => {
                        stage(&mut staging, &digests, *list, key, object)?;
                    }
                    WriteOp::Commit { list, set, meta } => {
                        synced = None;
                        let mut tables = Tables {
                            objects: &mut objects,
                            digests: &mut digests,
                            history: &mut history,
                            sets: &mut sets,
                        };
                        commit(&mut tables, &mut staging, *list, set, meta.clone())?;
                    }
                    WriteOp::Abort { list } => abort(&mut staging, *list)?,
                    WriteOp::Upsert { .. } | WriteOp::Fetched { .. } => {
                        let read = upsert(&mut objects, &mut digests, &history, &sets, op)?;
                        unreadable += u64::from(!read);
                    }
                    WriteOp::Remove {
                        set,
                        key,
                        object,
                        resource_version: _,
                    } => {
                        let mut tables = Tables {
                            objects: &mut objects,
                            digests: &mut digests,
                            history: &mut history,
                            sets: &mut sets,
                        };
                        history::leave(&mut tables, set, key, object)?;
                    }
                    WriteOp::Entered {
                        set,
                        key,
                        resource_version,
                    } => history::entered(&mut history, &sets, set, key, resource_version)?,
                    WriteOp::Lost { set } => {
                        synced = None;
                        mark_stale(&mut sets, set)?;
                    }
                    WriteOp::OwnWrite {
                        set,
                        resource_version,
                    } => {
                        synced = None;
                        mark_own_write(&mut sets, set, resource_version)?;
                    }
                    WriteOp::Running { secs } => {
                        clocks.insert(RUNNING, *secs).map_err(engine)?;
                    }
                    WriteOp::VersionClock { clock, version } => {
                        let name = clock_name(*clock);
                        let stored = clocks.get(name).map_err(engine)?.map_or(0, |v| v.value());
                        clocks.insert(name, stored.max(*version)).map_err(engine)?;
                    }
                    WriteOp::Synced {
                        set,
                        resource_version,
                    } => {
                        if let Some((last, at)) = synced
                            && last == set
                            && compare_versions(resource_version, at).is_some_and(|o| o.is_le())
                        {
                            continue;
                        }
                        synced = sync(&mut sets, set, resource_version)?
                            .then_some((set, resource_version.as_str()));
                    }
                    WriteOp::Touch { component, at } => {
                        components.insert(component.as_str(), *at).map_err(engine)?;
                    }
                    WriteOp::LocalMark { key } => {
                        local_marks::mark(&mut local, &digests, key)?;
                        marked = true;
                    }
                }
            }
            if marked {
                local_marks::prune(&mut local, &digests)?;
            }
        }
        txn.commit().map_err(engine)?;
        Ok(Applied {
            wrote: true,
            unreadable,
        })
    }

    fn remove_component(&self, component: &str) -> Result<u64, StoreError> {
        let prefix = format!("{component}/");
        let end = prefix_end(&prefix);
        let mut removed = 0u64;
        let txn = self.db.begin_write().map_err(engine)?;
        {
            let mut objects = txn.open_table(OBJECTS).map_err(engine)?;
            objects
                .retain_in(prefix.as_str()..end.as_str(), |_, _| {
                    removed += 1;
                    false
                })
                .map_err(engine)?;
            let mut digests = txn.open_table(DIGESTS).map_err(engine)?;
            digests
                .retain_in(prefix.as_str()..end.as_str(), |_, _| false)
                .map_err(engine)?;
            let mut sets = txn.open_table(SETS).map_err(engine)?;
            sets.retain_in(prefix.as_str()..end.as_str(), |_, _| false)
                .map_err(engine)?;
            let mut history = txn.open_table(HISTORY).map_err(engine)?;
            history
                .retain_in((prefix.as_str(), "")..(end.as_str(), ""), |_, _| false)
                .map_err(engine)?;
            let mut components = txn.open_table(COMPONENTS).map_err(engine)?;
            components.remove(component).map_err(engine)?;
            local_marks::clear(&mut txn.open_table(LOCAL).map_err(engine)?, &prefix)?;
        }
        txn.commit().map_err(engine)?;
        Ok(removed)
    }
}

mod digest;
mod history;
mod local_marks;
mod sets;
mod tables;
#[cfg(test)]
mod tests;
mod unchanged;
