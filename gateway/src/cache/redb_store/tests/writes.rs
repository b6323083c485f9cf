//! Single writes: upserts, syncs, batches that change nothing, removing a component.

use super::*;

#[test]
fn upserts_never_go_back_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let key = services().object_key("a", "x");
    let upsert = |rv: u32| WriteOp::Upsert {
        key: key.clone(),
        object: svc("a", "x", rv, ""),
        resource_version: rv.to_string(),
    };
    store.apply(&[upsert(5), upsert(3)], false).unwrap();
    let version = |store: &RedbStore| {
        Meta::parse(&store.get(&key).unwrap().unwrap())
            .unwrap()
            .resource_version
            .into_owned()
    };
    assert_eq!(version(&store), "5");
    store.apply(&[upsert(5), upsert(9)], false).unwrap();
    assert_eq!(version(&store), "9");
    assert_digests_agree(&store);
    let all = SetKey::new(services(), "", "", "");
    store
        .apply(
            &[WriteOp::Remove {
                set: all,
                key: key.clone(),
                object: svc("a", "x", 10, ""),
                resource_version: "10".into(),
            }],
            true,
        )
        .unwrap();
    assert!(store.get(&key).unwrap().is_none());
    assert_digests_agree(&store);
}

#[test]
fn a_batch_that_changes_nothing_is_not_written_unless_it_must_be_durable() {
    let all = SetKey::new(services(), "", "", "");
    let never_listed = SetKey::new(services(), "b", "", "");
    let (_dir, store) = store_with(&[stage(1, "a", "x", 5, ""), commit(1, &all, "10")]);
    let key = services().object_key("a", "x");
    let upsert = |rv: u32, labels: &str| WriteOp::Upsert {
        key: key.clone(),
        object: svc("a", "x", rv, labels),
        resource_version: rv.to_string(),
    };
    let synced = |set: &SetKey, rv: &str| WriteOp::Synced {
        set: set.clone(),
        resource_version: rv.into(),
    };
    // The object as stored, an older one, a sync to a version the set is past, and a sync
    // of a set never listed: nothing to write.
    let nothing = [
        upsert(5, ""),
        upsert(4, r#""old":"yes""#),
        synced(&all, "9"),
        synced(&never_listed, "99"),
    ];
    assert!(!store.apply(&nothing, false).unwrap().wrote);
    assert!(store.apply(&nothing, true).unwrap().wrote);
    // Any one change, and every other kind of write, is written.
    for op in [
        upsert(5, r#""same":"version""#),
        upsert(6, ""),
        synced(&all, "11"),
        WriteOp::Touch {
            component: "kube-proxy".into(),
            at: 1,
        },
    ] {
        let batch = [synced(&never_listed, "99"), op];
        assert!(store.apply(&batch, false).unwrap().wrote, "{batch:?}");
    }
    assert_eq!(store.get(&key).unwrap().unwrap(), svc("a", "x", 6, ""));
    assert_eq!(store.sets("").unwrap()[0].1.resource_version, "11");
}

#[test]
fn a_fetched_object_is_stored_only_when_it_reads_whole() {
    let all = SetKey::new(services(), "", "", "");
    let (_dir, store) = store_with(&[stage(1, "a", "x", 5, ""), commit(1, &all, "10")]);
    let key = services().object_key("a", "x");
    let fetched = |rv: u32, labels: &str| WriteOp::Fetched {
        key: key.clone(),
        object: svc("a", "x", rv, labels),
        resource_version: rv.to_string(),
    };
    // The object as stored, and an older one: nothing written, nothing refused.
    assert_eq!(
        store
            .apply(&[fetched(5, ""), fetched(4, "")], false)
            .unwrap(),
        Applied::default()
    );
    // Newer, but not JSON past its metadata, or giving its name twice: refused, counted.
    for labels in [r#""a":tru"#, r#""a":"b"},"name":"y","labels":{"#] {
        let applied = store.apply(&[fetched(6, labels)], false).unwrap();
        assert_eq!(applied.unreadable, 1, "{labels}");
        assert_eq!(store.get(&key).unwrap().unwrap(), svc("a", "x", 5, ""));
    }
    // Among other writes, each refused alone.
    let applied = store
        .apply(&[fetched(6, r#""a":tru"#), synced_op(&all, "11")], false)
        .unwrap();
    assert_eq!((applied.wrote, applied.unreadable), (true, 1));
    // Newer and whole: stored.
    assert_eq!(
        store.apply(&[fetched(7, r#""a":"b""#)], false).unwrap(),
        Applied {
            wrote: true,
            unreadable: 0
        }
    );
    assert_eq!(
        store.get(&key).unwrap().unwrap(),
        svc("a", "x", 7, r#""a":"b""#)
    );
    assert_digests_agree(&store);
}

fn synced_op(set: &SetKey, rv: &str) -> WriteOp {
    WriteOp::Synced {
        set: set.clone(),
        resource_version: rv.into(),
    }
}

#[test]
fn synced_versions_only_advance_and_only_for_listed_sets() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let all = SetKey::new(services(), "", "", "");
    let other = SetKey::new(services(), "b", "", "");
    let synced = |set: &SetKey, rv: &str| WriteOp::Synced {
        set: set.clone(),
        resource_version: rv.into(),
    };
    store
        .apply(
            &[
                commit(1, &all, "10"),
                synced(&all, "15"),
                synced(&all, "12"),
                synced(&other, "99"),
            ],
            true,
        )
        .unwrap();
    let sets = store.sets("").unwrap();
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].1.resource_version, "15");
    // In one transaction, as the watches of a set sync it: a re-list between syncs sets
    // the list's version, and the syncs after it move on from there.
    store
        .apply(
            &[
                synced(&all, "20"),
                synced(&all, "20"),
                commit(2, &all, "16"),
                synced(&all, "18"),
                synced(&all, "17"),
            ],
            true,
        )
        .unwrap();
    assert_eq!(store.sets("").unwrap()[0].1.resource_version, "18");
}

#[test]
fn removing_a_component_removes_all_it_had() {
    let all = SetKey::new(services(), "", "", "");
    let (_dir, store) = store_with(&[
        stage(1, "a", "x", 1, ""),
        commit(1, &all, "1"),
        WriteOp::Touch {
            component: "kube-proxy".into(),
            at: 3,
        },
        WriteOp::Upsert {
            key: "kubelet/pods.v1.core/a/p".into(),
            object: svc("a", "p", 1, ""),
            resource_version: "1".into(),
        },
    ]);
    assert_eq!(store.components().unwrap(), [("kube-proxy".to_owned(), 3)]);
    assert_eq!(store.remove_component("kube-proxy").unwrap(), 1);
    assert!(store.sets("").unwrap().is_empty());
    assert!(store.components().unwrap().is_empty());
    assert_eq!(names(&store, ""), ["kubelet/pods.v1.core/a/p"]);
    assert_digests_agree(&store);
}
