use std::io::{Seek, SeekFrom, Write};

use super::*;
use crate::cache::key::ResourceKey;
use crate::cache::{Cache, CachePolicy};

fn services() -> ResourceKey {
    ResourceKey {
        component: "kube-proxy".into(),
        resource: "services".into(),
        version: "v1".into(),
        group: String::new(),
    }
}

/// A 1 KiB Service; 2 000 of them make a file of several MiB, past the store's page cache.
fn upsert(n: u32) -> WriteOp {
    let name = format!("svc-{n:05}");
    let object = format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"default","resourceVersion":"{n}"}},"spec":{{"padding":"{}"}}}}"#,
        "x".repeat(1000)
    );
    WriteOp::Upsert {
        key: services().object_key("default", &name),
        object: Bytes::from(object),
        resource_version: n.to_string(),
    }
}

/// A cache directory whose store holds 2 000 Services, closed.
fn filled() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let ops: Vec<WriteOp> = (0..2000).map(upsert).collect();
    for batch in ops.chunks(200) {
        store.apply(batch, true).unwrap();
    }
    drop(store);
    dir
}

/// Writes 16 KiB of seeded random bytes into the middle of the store file.
fn scribble_in_the_middle(dir: &Path, seed: u64) {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(FILE))
        .unwrap();
    let middle = file.metadata().unwrap().len() / 2;
    let mut rng = fastrand::Rng::with_seed(seed);
    let noise: Vec<u8> = std::iter::repeat_with(|| rng.u8(..))
        .take(16 << 10)
        .collect();
    file.seek(SeekFrom::Start(middle)).unwrap();
    file.write_all(&noise).unwrap();
    file.sync_all().unwrap();
}

/// Reads everything the store holds, as the local proxy and `edgegate cache ls` would.
fn read_everything(store: &GuardedStore) -> Result<usize, StoreError> {
    store.sets("")?;
    store.components()?;
    let mut objects = 0;
    for entry in store.scan("")? {
        let (key, _) = entry?;
        store.get(&key)?;
        objects += 1;
    }
    Ok(objects)
}

/// Asserts that `store` replaced a damaged file: moved aside, counted, reported, and the
/// fresh store takes writes and reads them back.
fn assert_replaced(dir: &Path, store: &GuardedStore, metrics: &CacheMetrics) {
    let damage = store.damage().expect("the damage is reported");
    assert_eq!(damage.resets, 1);
    assert_eq!(metrics.store_resets.get(), 1);
    assert!(!damage.in_memory, "{damage:?}");
    let aside = damage
        .aside
        .as_ref()
        .expect("the damaged file is moved aside");
    assert!(aside.exists(), "{}", aside.display());
    assert!(
        aside
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("edgegate.redb.damaged-"),
        "{}",
        aside.display()
    );
    assert!(dir.join(FILE).exists());
    store.apply(&[upsert(7)], true).unwrap();
    let key = services().object_key("default", "svc-00007");
    assert!(store.get(&key).unwrap().is_some());
}

#[test]
fn random_bytes_in_the_middle_of_the_file_never_panic_and_a_fresh_store_takes_over() {
    let mut detected = 0;
    for seed in 1..=4 {
        let dir = filled();
        scribble_in_the_middle(dir.path(), seed);
        let metrics = CacheMetrics::default();
        let store = GuardedStore::open(dir.path(), metrics.clone()).unwrap();
        // The damage is found at open or by the first read that reaches it; either way
        // the caller gets an answer, never a panic.
        let read = read_everything(&store);
        if store.damage().is_none() {
            assert_eq!(
                read.unwrap(),
                2000,
                "seed {seed}: undamaged reads are whole"
            );
            continue;
        }
        detected += 1;
        assert_replaced(dir.path(), &store, &metrics);
        assert!(read_everything(&store).is_ok(), "seed {seed}");
    }
    assert!(
        detected > 0,
        "no seed damaged the store: the test tests nothing"
    );
}

#[test]
fn a_truncated_file_is_moved_aside_at_open() {
    let dir = filled();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(FILE))
        .unwrap();
    let len = file.metadata().unwrap().len();
    file.set_len(len / 3).unwrap();
    drop(file);
    let metrics = CacheMetrics::default();
    let store = GuardedStore::open(dir.path(), metrics.clone()).unwrap();
    let _ = read_everything(&store);
    assert_replaced(dir.path(), &store, &metrics);
}

#[test]
fn an_unreadable_file_is_moved_aside_at_open() {
    let dir = tempfile::tempdir().unwrap();
    // Not a file at all (a mode would not stop root, who runs the gateway).
    std::fs::create_dir(dir.path().join(FILE)).unwrap();
    let metrics = CacheMetrics::default();
    let store = GuardedStore::open(dir.path(), metrics.clone()).unwrap();
    assert_replaced(dir.path(), &store, &metrics);
}

#[test]
fn a_file_another_process_holds_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let _held = RedbStore::open(dir.path()).unwrap();
    let error = GuardedStore::open(dir.path(), CacheMetrics::default())
        .err()
        .expect("two gateways must not share a cache");
    assert!(!error.is_damage(), "{error}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_store_that_panics_is_replaced_and_the_panic_contained() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = CacheMetrics::default();
    let store = GuardedStore::open(dir.path(), metrics.clone()).unwrap();
    store.apply(&[upsert(1)], true).unwrap();
    let error = store
        .inner
        .run(|_| -> Result<(), StoreError> { panic!("entered unreachable code") })
        .unwrap_err();
    assert!(
        matches!(&error, StoreError::Panicked(m) if m.contains("unreachable")),
        "{error}"
    );
    let damage = store.damage().expect("a panic is damage");
    assert!(damage.reason.contains("unreachable"), "{damage:?}");
    // The fresh store starts empty, and works.
    assert_eq!(read_everything(&store).unwrap(), 0);
    assert_replaced(dir.path(), &store, &metrics);
}

#[test]
fn a_list_begun_on_a_replaced_store_does_not_commit_to_the_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = CacheMetrics::default();
    let store = GuardedStore::open(dir.path(), metrics.clone()).unwrap();
    let set = SetKey::new(services(), "", "", "");
    let WriteOp::Upsert { key, object, .. } = upsert(1) else {
        unreachable!()
    };
    let stage = |list| WriteOp::Stage {
        list,
        key: key.clone(),
        object: object.clone(),
    };
    let commit = |list| WriteOp::Commit {
        list,
        set: set.clone(),
        meta: SetMeta {
            resource_version: "9".into(),
            ..SetMeta::default()
        },
    };
    store.apply(&[stage(1)], false).unwrap();
    let _ = store
        .inner
        .run(|_| -> Result<(), StoreError> { panic!("damaged") });
    // List 1's item went with the old store: committing it would leave its set empty.
    store.apply(&[commit(1)], true).unwrap();
    assert!(store.sets("").unwrap().is_empty());
    assert_eq!(metrics.aborted.get(), 1);
    // A list begun on the fresh store commits.
    store.apply(&[stage(2), commit(2)], true).unwrap();
    assert_eq!(store.sets("").unwrap().len(), 1);
    assert!(store.get(&key).unwrap().is_some());
}

#[test]
fn the_writer_outlives_a_panic_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // Its first write panics, as a damaged redb may; the rest succeed.
    let panicked = std::sync::atomic::AtomicBool::default();
    let store = Arc::new(crate::cache::hooked::Hooked {
        store: RedbStore::open(dir.path()).unwrap(),
        before_apply: move || {
            if !panicked.swap(true, Ordering::SeqCst) {
                panic!("a write panicked");
            }
        },
    });
    let metrics = CacheMetrics::default();
    let cache = Cache::start(store.clone(), CachePolicy::new(&["*"]), metrics.clone());
    cache.touch("kubelet");
    cache.flush();
    // The writer took the next write (and counted the panic before it did).
    cache.touch("kube-proxy");
    cache.flush();
    assert_eq!(metrics.write_errors.get(), 1);
    let components = store.components().unwrap();
    assert_eq!(components.len(), 1, "{components:?}");
    assert_eq!(components[0].0, "kube-proxy");
    cache.close();
}

mod runtime;
