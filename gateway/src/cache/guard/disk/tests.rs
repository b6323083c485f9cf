//! The guard over a disk that fails on demand: full, read-only, then working again.

use crate::cache::StoreWriter;
use std::fs::{File, OpenOptions};
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use redb::StorageBackend;
use redb::backends::FileBackend;

use super::super::{GuardedStore, Opener};
use crate::cache::key::{ResourceKey, SetKey};
use crate::cache::metrics::{CacheMetrics, FaultLabels};
use crate::cache::redb_store::{FILE, RedbStore};
use crate::cache::store::{SetMeta, Store, StoreError, WriteOp};

const WORKS: u8 = 0;
const FULL: u8 = 1;
const READ_ONLY: u8 = 2;

/// The disk's state, shared by the test and every file it opens.
#[derive(Clone, Default)]
struct Switch(std::sync::Arc<AtomicU8>);

impl Switch {
    fn set(&self, mode: u8) {
        self.0.store(mode, Ordering::SeqCst);
    }

    /// The error a write gets now, if any.
    fn failure(&self) -> Option<io::Error> {
        match self.0.load(Ordering::SeqCst) {
            FULL => Some(io::Error::from(io::ErrorKind::StorageFull)),
            READ_ONLY => Some(io::Error::from(io::ErrorKind::ReadOnlyFilesystem)),
            _ => None,
        }
    }
}

/// A file whose writes fail as the switch says; reads always work. A full disk takes
/// writes within what the file holds, as a file system with no free blocks left does:
/// opening the file again works, growing it does not.
#[derive(Debug)]
struct Faulty {
    file: FileBackend,
    switch: std::sync::Arc<AtomicU8>,
}

impl Faulty {
    /// Whether a write up to `end` fails now.
    fn check(&self, end: u64) -> io::Result<()> {
        let Some(error) = Switch(self.switch.clone()).failure() else {
            return Ok(());
        };
        if error.kind() == io::ErrorKind::StorageFull && end <= self.file.len()? {
            return Ok(());
        }
        Err(error)
    }
}

impl StorageBackend for Faulty {
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.file.read(offset, out)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check(len)?;
        self.file.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.check(0)?;
        self.file.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check(offset + data.len() as u64)?;
        self.file.write(offset, data)
    }
}

/// Opens the store file over the switched disk; a read-only disk refuses to open it for
/// writing, as the kernel does.
fn opener(switch: &Switch) -> Opener {
    let switch = switch.clone();
    Box::new(move |dir| {
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| StoreError::Open {
            path: dir.to_owned(),
            source,
        };
        if switch.0.load(Ordering::SeqCst) == READ_ONLY {
            let error = io::Error::from(io::ErrorKind::ReadOnlyFilesystem);
            return Err(failed(Box::new(error)));
        }
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(FILE))
            .map_err(|e| failed(Box::new(e)))?;
        let file = FileBackend::new(file).map_err(|e| failed(Box::new(redb::Error::from(e))))?;
        RedbStore::with_backend(Faulty {
            file,
            switch: switch.0.clone(),
        })
    })
}

fn services() -> ResourceKey {
    ResourceKey {
        component: "kube-proxy".into(),
        resource: "services".into(),
        version: "v1".into(),
        group: String::new(),
    }
}

fn set() -> SetKey {
    SetKey::new(services(), "", "", "")
}

fn key(name: &str) -> String {
    services().object_key("default", name)
}

fn stage(list: u64, name: &str) -> WriteOp {
    WriteOp::Stage {
        list,
        key: key(name),
        object: Bytes::from(format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"default","resourceVersion":"5"}}}}"#
        )),
    }
}

fn commit(list: u64, rv: &str) -> WriteOp {
    WriteOp::Commit {
        list,
        set: set(),
        meta: SetMeta {
            resource_version: rv.into(),
            ..SetMeta::default()
        },
    }
}

fn synced(rv: &str) -> WriteOp {
    WriteOp::Synced {
        set: set(),
        resource_version: rv.into(),
    }
}

/// The set's metadata, when it is committed.
fn meta(store: &GuardedStore) -> Option<SetMeta> {
    store.sets("").unwrap().into_iter().next().map(|(_, m)| m)
}

/// Waits until the store opened again (it is tried at most once a second) and a durable
/// write, as the writer makes every second, ended the fault.
fn wait_open(store: &GuardedStore) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.fault().is_some() {
        assert!(Instant::now() < deadline, "the store never opened again");
        let _ = store.apply(&[], true);
        // A pause between polls, not a timing assumption: the loop waits for the state.
        std::thread::park_timeout(Duration::from_millis(20));
    }
}

/// An object of 256 KiB: a few of them make the file grow.
fn large(list: u64, n: u32) -> WriteOp {
    let name = format!("large-{n}");
    WriteOp::Stage {
        list,
        key: key(&name),
        object: Bytes::from(format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"default","resourceVersion":"5"}},"data":"{}"}}"#,
            "x".repeat(256 << 10)
        )),
    }
}

fn faults(metrics: &CacheMetrics, kind: &'static str) -> u64 {
    metrics
        .disk_faults
        .get_or_create(&FaultLabels { kind })
        .get()
}

/// A store over the switched disk, holding a committed set of `a` and `b` at version 10.
fn listed() -> (tempfile::TempDir, Switch, CacheMetrics, GuardedStore) {
    let dir = tempfile::tempdir().unwrap();
    let switch = Switch::default();
    let metrics = CacheMetrics::default();
    let store = GuardedStore::open_with(dir.path(), metrics.clone(), opener(&switch)).unwrap();
    store
        .apply(&[stage(1, "a"), stage(1, "b"), commit(1, "10")], true)
        .unwrap();
    (dir, switch, metrics, store)
}

#[test]
fn a_full_disk_closes_the_store_once_and_it_opens_again_when_space_is_freed() {
    let (_dir, switch, metrics, store) = listed();
    switch.set(FULL);
    let mut failed = 0;
    for n in 0..40 {
        if let Err(error) = store.apply(&[large(100 + u64::from(n), n)], true) {
            assert!(error.disk_fault().is_some(), "{error}");
            failed += 1;
        }
    }
    // The file opens again on the full disk, and each write that needs room fails again.
    assert!(failed >= 20, "{failed} writes failed");
    let fault = store.fault().expect("the fault is reported");
    assert_eq!((fault.kind, fault.episodes), ("full", 1));
    // One episode, however many writes it failed.
    assert_eq!(faults(&metrics, "full"), 1);
    assert!(store.damage().is_none(), "a full disk is not damage");
    switch.set(WORKS);
    wait_open(&store);
    // The set committed before the fault is there, and the cache writes again.
    assert_eq!(meta(&store).unwrap().resource_version, "10");
    assert!(store.get(&key("a")).unwrap().is_some());
    store
        .apply(&[stage(1000, "c"), commit(1000, "20")], true)
        .unwrap();
    assert_eq!(meta(&store).unwrap().resource_version, "20");
    // A second fault is a second episode.
    switch.set(READ_ONLY);
    store.apply(&[synced("21")], true).unwrap_err();
    assert_eq!(store.fault().unwrap().episodes, 2);
    assert_eq!(faults(&metrics, "read_only"), 1);
}

#[test]
fn a_list_staged_before_a_disk_fault_does_not_commit_part_of_its_set() {
    let (_dir, switch, metrics, store) = listed();
    store.apply(&[stage(2, "c"), stage(2, "d")], false).unwrap();
    switch.set(READ_ONLY);
    // Non-durable commits stay in redb's buffers: the disk's failure shows at the flush.
    store.apply(&[stage(2, "e")], true).unwrap_err();
    // A list begun while the store is closed loses its items too.
    let closed = store.apply(&[stage(3, "h")], false).unwrap_err();
    assert!(matches!(closed, StoreError::Unavailable), "{closed}");
    switch.set(WORKS);
    wait_open(&store);
    store
        .apply(&[stage(3, "i"), commit(3, "35")], true)
        .unwrap();
    assert_eq!(meta(&store).unwrap().resource_version, "10");
    // c and d went with the non-durable commits, e with the failed one: the list cannot
    // commit whole, and the set stays the one committed before.
    store
        .apply(&[stage(2, "f"), commit(2, "30")], true)
        .unwrap();
    let meta = meta(&store).unwrap();
    assert_eq!((meta.resource_version.as_str(), meta.items), ("10", 0));
    assert!(store.get(&key("f")).unwrap().is_none());
    assert_eq!(metrics.aborted.get(), 2);
    // A list begun after the fault commits.
    store
        .apply(&[stage(4, "g"), commit(4, "40")], true)
        .unwrap();
    assert_eq!(self::meta(&store).unwrap().resource_version, "40");
}

#[test]
fn watch_writes_lost_to_a_disk_fault_leave_their_set_stale() {
    let (_dir, switch, _metrics, store) = listed();
    // Applied, not yet durable: a reopen goes back to before it.
    store.apply(&[synced("11")], false).unwrap();
    switch.set(READ_ONLY);
    store.apply(&[synced("12")], true).unwrap_err();
    switch.set(WORKS);
    wait_open(&store);
    store.apply(&[synced("13")], false).unwrap();
    // Without the mark the set would claim 13 while the writes of 11 and 12 are gone.
    let meta = meta(&store).unwrap();
    assert!(meta.stale, "{meta:?}");
    assert_eq!(meta.resource_version, "10");
    // A list of it makes it synced again.
    store
        .apply(&[stage(5, "a"), commit(5, "50")], true)
        .unwrap();
    assert!(!self::meta(&store).unwrap().stale);
}

#[test]
fn a_read_only_disk_at_start_leaves_the_file_where_it_is() {
    let (dir, switch, _, store) = listed();
    drop(store);
    switch.set(READ_ONLY);
    let metrics = CacheMetrics::default();
    let store = GuardedStore::open_with(dir.path(), metrics.clone(), opener(&switch)).unwrap();
    assert_eq!(store.fault().map(|f| f.kind), Some("read_only"));
    assert!(store.damage().is_none());
    assert!(matches!(store.sets(""), Err(StoreError::Unavailable)));
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(files, 1, "nothing is moved aside");
    switch.set(WORKS);
    wait_open(&store);
    assert_eq!(meta(&store).unwrap().resource_version, "10");
    assert_eq!(metrics.store_resets.get(), 0);
}
