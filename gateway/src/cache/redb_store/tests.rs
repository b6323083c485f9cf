use super::tables::Digest;
use super::*;
use crate::cache::key::ResourceKey;
use crate::stream::Meta;

fn services() -> ResourceKey {
    ResourceKey {
        component: "kube-proxy".into(),
        resource: "services".into(),
        version: "v1".into(),
        group: String::new(),
    }
}

fn svc(ns: &str, name: &str, rv: u32, labels: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"{rv}","labels":{{{labels}}}}}}}"#
    ))
}

fn stage(list: u64, ns: &str, name: &str, rv: u32, labels: &str) -> WriteOp {
    WriteOp::Stage {
        list,
        key: services().object_key(ns, name),
        object: svc(ns, name, rv, labels),
    }
}

fn commit(list: u64, set: &SetKey, rv: &str) -> WriteOp {
    WriteOp::Commit {
        list,
        set: set.clone(),
        meta: SetMeta {
            resource_version: rv.into(),
            list_kind: "ServiceList".into(),
            api_version: "v1".into(),
            committed_at: 1,
            ..SetMeta::default()
        },
    }
}

fn names(store: &RedbStore, prefix: &str) -> Vec<String> {
    store
        .scan(prefix)
        .unwrap()
        .map(|entry| entry.unwrap().0)
        .collect()
}

/// Asserts that the digests are those of the stored objects, key for key.
fn assert_digests_agree(store: &RedbStore) {
    let txn = store.db.begin_read().unwrap();
    let objects = txn.open_table(OBJECTS).unwrap();
    let digests = txn.open_table(DIGESTS).unwrap();
    let of_objects: Vec<(String, Digest)> = objects
        .iter()
        .unwrap()
        .map(|e| e.unwrap())
        .map(|(k, v)| (k.value().to_owned(), digest::of(v.value())))
        .collect();
    let kept: Vec<(String, Digest)> = digests
        .iter()
        .unwrap()
        .map(|e| e.unwrap())
        .map(|(k, v)| (k.value().to_owned(), v.value()))
        .collect();
    assert_eq!(kept, of_objects);
}

/// A store in a fresh directory (held as long as the store), with `ops` applied durably.
fn store_with(ops: &[WriteOp]) -> (tempfile::TempDir, RedbStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    store.apply(ops, true).unwrap();
    (dir, store)
}

mod set_history;
mod writes;

#[test]
fn a_committed_list_replaces_its_set() {
    let all = SetKey::new(services(), "", "", "");
    let (_dir, store) = store_with(&[
        stage(1, "a", "x", 1, ""),
        stage(1, "b", "y", 1, ""),
        commit(1, &all, "10"),
    ]);
    assert_eq!(
        names(&store, &services().prefix()),
        [
            "kube-proxy/services.v1.core/a/x",
            "kube-proxy/services.v1.core/b/y"
        ]
    );

    // The next list no longer holds b/y: it is gone; a/x is overwritten.
    store
        .apply(&[stage(2, "a", "x", 5, ""), commit(2, &all, "20")], true)
        .unwrap();
    assert_eq!(
        names(&store, &services().prefix()),
        ["kube-proxy/services.v1.core/a/x"]
    );
    let stored = store
        .get("kube-proxy/services.v1.core/a/x")
        .unwrap()
        .unwrap();
    assert_eq!(Meta::parse(&stored).unwrap().resource_version, "5");
    assert_digests_agree(&store);
    let sets = store.sets(&SetKey::resource_prefix(&services())).unwrap();
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].1.resource_version, "20");
}

#[test]
fn an_empty_list_leaves_an_empty_set() {
    let all = SetKey::new(services(), "", "", "");
    let (_dir, store) = store_with(&[stage(1, "a", "x", 1, ""), commit(1, &all, "1")]);
    store.apply(&[commit(2, &all, "2")], true).unwrap();
    assert!(names(&store, &services().prefix()).is_empty());
    assert_eq!(store.sets("").unwrap().len(), 1);
}

#[test]
fn a_list_with_a_selector_replaces_only_what_it_selects() {
    let web = SetKey::new(services(), "a", "app=web", "");
    let (_dir, store) = store_with(&[
        stage(1, "a", "web", 1, r#""app":"web""#),
        stage(1, "a", "db", 1, r#""app":"db""#),
        commit(1, &SetKey::new(services(), "b", "", ""), "1"),
    ]);
    // The web list comes back empty: web is gone, db (never selected) stays.
    store.apply(&[commit(2, &web, "2")], true).unwrap();
    assert_eq!(
        names(&store, &services().prefix()),
        ["kube-proxy/services.v1.core/a/db"]
    );
    assert_digests_agree(&store);
}

/// Whether `name` has left `set` by its history, and at which version.
#[test]
fn an_aborted_list_leaves_the_old_set() {
    let all = SetKey::new(services(), "", "", "");
    let (_dir, store) = store_with(&[stage(1, "a", "x", 1, ""), commit(1, &all, "1")]);
    store.apply(&[stage(2, "a", "new", 2, "")], false).unwrap();
    store.apply(&[WriteOp::Abort { list: 2 }], true).unwrap();
    assert_eq!(
        names(&store, &services().prefix()),
        ["kube-proxy/services.v1.core/a/x"]
    );
    let txn = store.db.begin_read().unwrap();
    let staging = txn.open_table(STAGING).unwrap();
    assert_eq!(staging.iter().unwrap().count(), 0);
}

#[test]
fn staging_left_by_a_crash_is_cleared_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = RedbStore::open(dir.path()).unwrap();
        store.apply(&[stage(7, "a", "half", 1, "")], true).unwrap();
    }
    let store = RedbStore::open(dir.path()).unwrap();
    let txn = store.db.begin_read().unwrap();
    let staging = txn.open_table(STAGING).unwrap();
    assert_eq!(staging.iter().unwrap().count(), 0);
}

#[test]
fn prefix_end_bounds_the_prefix() {
    assert_eq!(prefix_end("a/"), "a0");
    assert!("a/zzz" < prefix_end("a/").as_str());
}

#[test]
fn a_relist_of_unchanged_objects_keeps_them_and_replaces_the_rest() {
    let all = SetKey::new(services(), "", "", "");
    let (_dir, store) = store_with(&[
        stage(1, "a", "x", 1, ""),
        stage(1, "a", "y", 1, ""),
        stage(1, "a", "z", 1, ""),
        commit(1, &all, "10"),
    ]);
    // x comes back unchanged, y changed, z is gone, w is new.
    store
        .apply(
            &[
                stage(2, "a", "x", 1, ""),
                stage(2, "a", "y", 2, ""),
                stage(2, "a", "w", 2, ""),
            ],
            false,
        )
        .unwrap();
    let staged_bytes = |name: &str| {
        let txn = store.db.begin_read().unwrap();
        let staging = txn.open_table(STAGING).unwrap();
        let key = services().object_key("a", name);
        staging
            .get((2, key.as_str()))
            .unwrap()
            .map(|staged| staged.value().len())
            .unwrap()
    };
    assert_eq!(
        staged_bytes("x"),
        0,
        "an unchanged item is staged as its key"
    );
    assert!(staged_bytes("y") > 0 && staged_bytes("w") > 0);
    store.apply(&[commit(2, &all, "20")], true).unwrap();
    let rv = |name: &str| {
        let stored = store.get(&services().object_key("a", name)).unwrap();
        stored.map(|object| Meta::parse(&object).unwrap().resource_version.to_string())
    };
    assert_eq!(
        [rv("w"), rv("x"), rv("y"), rv("z")],
        [
            Some("2".to_owned()),
            Some("1".to_owned()),
            Some("2".to_owned()),
            None
        ]
    );
    assert_eq!(
        store
            .get(&services().object_key("a", "x"))
            .unwrap()
            .unwrap(),
        svc("a", "x", 1, ""),
        "the unchanged object keeps its bytes"
    );
    assert_digests_agree(&store);
}

#[test]
fn a_store_written_without_digests_has_them_computed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let all = SetKey::new(services(), "", "", "");
    {
        let store = RedbStore::open(dir.path()).unwrap();
        store
            .apply(
                &[
                    stage(1, "a", "x", 1, ""),
                    stage(1, "a", "gone", 1, ""),
                    commit(1, &all, "10"),
                ],
                true,
            )
            .unwrap();
        // As a store of a version that kept no digests left it.
        let txn = store.db.begin_write().unwrap();
        txn.delete_table(DIGESTS).unwrap();
        txn.commit().unwrap();
    }
    let store = RedbStore::open(dir.path()).unwrap();
    assert_digests_agree(&store);
    // A re-list finds x unchanged and the member it no longer holds.
    store
        .apply(&[stage(2, "a", "x", 1, ""), commit(2, &all, "20")], true)
        .unwrap();
    assert_eq!(
        names(&store, &services().prefix()),
        ["kube-proxy/services.v1.core/a/x"]
    );
}

#[test]
fn a_local_mark_counts_until_the_cloud_replaces_its_object_or_it_leaves() {
    let upsert = |name: &str, rv: u32| WriteOp::Upsert {
        key: services().object_key("default", name),
        object: svc("default", name, rv, ""),
        resource_version: rv.to_string(),
    };
    let mark = |name: &str| WriteOp::LocalMark {
        key: services().object_key("default", name),
    };
    let (_dir, store) = store_with(&[upsert("a", 5), upsert("b", 5)]);
    assert!(store.local_layer().unwrap().is_empty());

    store
        .apply(
            &[upsert("a", 7), mark("a"), upsert("b", 7), mark("b")],
            true,
        )
        .unwrap();
    let live = store.local_layer().unwrap();
    assert_eq!(
        live,
        [
            (
                services().object_key("default", "a"),
                svc("default", "a", 7, "").len() as u64
            ),
            (
                services().object_key("default", "b"),
                svc("default", "b", 7, "").len() as u64
            ),
        ]
    );

    // The cloud's newer `a` replaces the node's; the same bytes again change nothing.
    store
        .apply(&[upsert("a", 9), upsert("b", 7)], true)
        .unwrap();
    assert_eq!(
        store.local_layer().unwrap().len(),
        1,
        "only b is the node's"
    );
    // The stale mark of `a` goes at the next mark; a component's removal takes its marks.
    store.apply(&[upsert("b", 8), mark("b")], true).unwrap();
    {
        let txn = store.db.begin_read().unwrap();
        let marks = txn.open_table(LOCAL).unwrap();
        assert_eq!(
            marks.iter().unwrap().count(),
            1,
            "a's stale mark was dropped"
        );
    }
    store.remove_component("kube-proxy").unwrap();
    assert!(store.local_layer().unwrap().is_empty());
    let txn = store.db.begin_read().unwrap();
    assert_eq!(txn.open_table(LOCAL).unwrap().iter().unwrap().count(), 0);
}
