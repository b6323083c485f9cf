//! A store file damaged while the gateway runs: truncated, or a page changed under redb.

use super::*;
use crate::cache::metrics::FaultLabels;

/// A run of an object's padding, 20 bytes past the middle of the store file, made `y`s:
/// the object stays well-formed JSON, and redb reads the page back without an error.
fn change_an_object_on_disk(dir: &Path) {
    let path = dir.join(FILE);
    let bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    let padding = bytes[middle..]
        .windows(200)
        .position(|w| w.iter().all(|b| *b == b'x'))
        .expect("an object's padding past the middle");
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.seek(SeekFrom::Start((middle + padding + 50) as u64))
        .unwrap();
    file.write_all(&[b'y'; 20]).unwrap();
    file.sync_all().unwrap();
}

fn changed(object: &[u8]) -> bool {
    object.windows(20).any(|w| w == [b'y'; 20])
}

fn faults(metrics: &CacheMetrics) -> u64 {
    ["full", "read_only", "io"]
        .into_iter()
        .map(|kind| {
            metrics
                .disk_faults
                .get_or_create(&FaultLabels { kind })
                .get()
        })
        .sum()
}

#[test]
fn an_object_changed_on_disk_is_never_read_back() {
    let dir = filled();
    change_an_object_on_disk(dir.path());
    // A file closed cleanly is opened without its checksums verified.
    let store = RedbStore::open(dir.path()).unwrap();
    let mut corrupt = 0;
    for n in 0..2000 {
        let key = services().object_key("default", &format!("svc-{n:05}"));
        match store.get(&key) {
            Ok(object) => assert!(!changed(&object.unwrap()), "{key} read back changed"),
            Err(error) => {
                assert!(
                    matches!(error, StoreError::Corrupt(_)) && error.is_damage(),
                    "{error}"
                );
                corrupt += 1;
            }
        }
    }
    assert_eq!(corrupt, 1, "the changed object is found");
    let mut read = 0;
    for entry in store.scan("").unwrap() {
        match entry {
            Ok((key, object)) => assert!(!changed(&object), "{key} scanned changed"),
            Err(error) => {
                assert!(error.is_damage(), "{error}");
                break;
            }
        }
        read += 1;
    }
    assert!(read < 2000, "the scan stops at the changed object");
}

#[test]
fn an_object_changed_under_a_running_store_replaces_it() {
    let dir = filled();
    let metrics = CacheMetrics::default();
    let store = GuardedStore::open(dir.path(), metrics.clone()).unwrap();
    change_an_object_on_disk(dir.path());
    let error = read_everything(&store).expect_err("the changed object is not read back");
    assert!(error.is_damage(), "{error}");
    assert!(store.damage().unwrap().reason.contains("digest"));
    assert_eq!(faults(&metrics), 0, "damage, not a disk fault");
    assert_replaced(dir.path(), &store, &metrics);
}

#[test]
fn a_file_truncated_under_a_running_store_is_damage_not_a_disk_fault() {
    for len in [|len| len / 2, |_| 0] {
        let dir = filled();
        let metrics = CacheMetrics::default();
        let store = GuardedStore::open(dir.path(), metrics.clone()).unwrap();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join(FILE))
            .unwrap();
        file.set_len(len(file.metadata().unwrap().len())).unwrap();
        drop(file);
        let error = read_everything(&store).expect_err("a page past the end");
        assert!(error.is_damage(), "{error}");
        assert!(error.disk_fault().is_none(), "{error}");
        // A full or read-only disk keeps its file; a truncated one is moved aside at once,
        // once, and no disk fault is told.
        assert_eq!(store.fault(), None);
        assert_eq!(faults(&metrics), 0);
        assert_replaced(dir.path(), &store, &metrics);
        assert_eq!(read_everything(&store).unwrap(), 1);
    }
}

#[test]
fn a_truncated_file_closed_first_for_a_disk_fault_is_replaced_all_the_same() {
    let dir = filled();
    let metrics = CacheMetrics::default();
    let store = GuardedStore::open(dir.path(), metrics.clone()).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(FILE))
        .unwrap()
        .set_len(0)
        .unwrap();
    // A reader meets the file's end, and before it tells the guard, a write meets the error
    // redb latched: the store is closed as for a failing disk.
    let truncated = store.inner.current.load_full().unwrap();
    let key = services().object_key("default", "svc-01000");
    let read = truncated.get(&key).expect_err("a page past the end");
    assert!(read.is_damage(), "{read}");
    let write = store
        .apply(&[upsert(1)], true)
        .expect_err("redb's latched error");
    assert_eq!(write.disk_fault(), Some("io"), "{write}");
    assert!(store.inner.current.load().is_none(), "closed");
    // The reader tells it now: the file is moved aside at once (opening the empty file
    // again would start a fresh store without a word).
    store.inner.failed(&truncated, &read);
    assert_replaced(dir.path(), &store, &metrics);
}
