use super::*;
use crate::cache::key::ResourceKey;

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
fn left_at(store: &RedbStore, set: &SetKey, name: &str) -> Option<String> {
    let key = services().object_key("a", name);
    store
        .history(set)
        .unwrap()
        .into_iter()
        .find_map(|(k, entry)| match entry {
            History::Left(last) if k == key => {
                Some(Meta::parse(&last).unwrap().resource_version.into_owned())
            }
            _ => None,
        })
}

#[test]
fn what_a_selector_list_no_longer_holds_leaves_it_but_not_another_set_that_holds_it() {
    let all = SetKey::new(services(), "", "", "");
    let web = SetKey::new(services(), "a", "app=web", "");
    let (_dir, store) = store_with(&[
        stage(1, "a", "web", 1, r#""app":"web""#),
        stage(1, "a", "db", 1, r#""app":"db""#),
        commit(1, &all, "1"),
        stage(2, "a", "web", 1, r#""app":"web""#),
        commit(2, &web, "2"),
    ]);
    // web no longer matches app=web (its new labels not seen yet): the all set keeps it.
    store.apply(&[commit(3, &web, "3")], true).unwrap();
    assert_eq!(
        names(&store, &services().prefix()),
        [
            "kube-proxy/services.v1.core/a/db",
            "kube-proxy/services.v1.core/a/web"
        ]
    );
    assert_eq!(left_at(&store, &web, "web").as_deref(), Some("3"));
    assert_eq!(left_at(&store, &all, "web"), None);
    assert_digests_agree(&store);
}

#[test]
fn a_deleted_event_of_a_selector_watch_leaves_its_set_and_the_store_only_when_nothing_else_holds_it()
 {
    let all = SetKey::new(services(), "", "", "");
    let web = SetKey::new(services(), "a", "app=web", "");
    let (_dir, store) = store_with(&[
        stage(1, "a", "web", 1, r#""app":"web""#),
        stage(1, "a", "db", 1, r#""app":"db""#),
        commit(1, &all, "1"),
        stage(2, "a", "web", 1, r#""app":"web""#),
        commit(2, &web, "2"),
    ]);
    let remove = |set: &SetKey, rv: u32| WriteOp::Remove {
        set: set.clone(),
        key: services().object_key("a", "web"),
        object: svc("a", "web", rv, r#""app":"web""#),
        resource_version: rv.to_string(),
    };
    let web_key = services().object_key("a", "web");
    store.apply(&[remove(&web, 3)], true).unwrap();
    assert!(
        store.get(&web_key).unwrap().is_some(),
        "the all set still holds it"
    );
    assert_eq!(left_at(&store, &web, "web").as_deref(), Some("3"));

    // Its DELETED on the all set's watch: gone from the store, and from every set.
    store.apply(&[remove(&all, 4)], true).unwrap();
    assert!(store.get(&web_key).unwrap().is_none());
    assert_eq!(left_at(&store, &all, "web").as_deref(), Some("4"));
    assert_digests_agree(&store);

    // With no other set holding it, a selector watch's DELETED removes it.
    let (_dir, alone) = store_with(&[
        stage(1, "a", "web", 1, r#""app":"web""#),
        commit(1, &web, "1"),
    ]);
    alone.apply(&[remove(&web, 6)], true).unwrap();
    assert!(alone.get(&web_key).unwrap().is_none());
}

#[test]
fn an_older_deleted_never_removes_a_newer_object() {
    let all = SetKey::new(services(), "", "", "");
    let (_dir, store) = store_with(&[stage(1, "a", "x", 5, ""), commit(1, &all, "5")]);
    let key = services().object_key("a", "x");
    store
        .apply(
            &[WriteOp::Remove {
                set: all.clone(),
                key: key.clone(),
                object: svc("a", "x", 4, ""),
                resource_version: "4".into(),
            }],
            true,
        )
        .unwrap();
    assert_eq!(store.get(&key).unwrap(), Some(svc("a", "x", 5, "")));
    assert_eq!(left_at(&store, &all, "x"), None);
}

#[test]
fn a_response_older_than_a_deletion_does_not_bring_the_object_back() {
    let web = SetKey::new(services(), "a", "app=web", "");
    let (_dir, store) = store_with(&[
        stage(1, "a", "x", 1, r#""app":"web""#),
        stage(1, "a", "y", 1, r#""app":"web""#),
        commit(1, &web, "1"),
    ]);
    let upsert = |name: &str, rv: u32, labels: &str| WriteOp::Upsert {
        key: services().object_key("a", name),
        object: svc("a", name, rv, labels),
        resource_version: rv.to_string(),
    };
    let names = |store: &RedbStore| {
        let prefix = services().namespace_prefix("a");
        let keys = names(store, &prefix);
        keys.iter()
            .map(|k| k[prefix.len()..].to_owned())
            .collect::<Vec<_>>()
    };
    let remove = |name: &str, rv: u32, labels: &str| WriteOp::Remove {
        set: web.clone(),
        key: services().object_key("a", name),
        object: svc("a", name, rv, labels),
        resource_version: rv.to_string(),
    };
    // x is deleted at 5; the response to a write of it at 4 arrives after.
    store
        .apply(&[remove("x", 5, r#""app":"web""#)], true)
        .unwrap();
    store
        .apply(&[upsert("x", 4, r#""app":"web""#)], true)
        .unwrap();
    assert_eq!(names(&store), ["y"]);
    // Created again under the same name, it is a newer object and is stored.
    store
        .apply(&[upsert("x", 7, r#""app":"web""#)], true)
        .unwrap();
    assert_eq!(names(&store), ["x", "y"]);

    // y only stops matching the selector at 5: it still exists, and a GET of it is kept.
    store
        .apply(&[remove("y", 5, r#""app":"db""#)], true)
        .unwrap();
    assert_eq!(names(&store), ["x"]);
    store
        .apply(&[upsert("y", 5, r#""app":"db""#)], true)
        .unwrap();
    assert_eq!(names(&store), ["x", "y"]);
    assert_digests_agree(&store);
}

#[test]
fn a_lost_event_keeps_the_set_at_its_last_consistent_version_until_it_is_listed_again() {
    let dir = tempfile::tempdir().unwrap();
    let all = SetKey::new(services(), "", "", "");
    let synced = |rv: &str| WriteOp::Synced {
        set: all.clone(),
        resource_version: rv.into(),
    };
    {
        let store = RedbStore::open(dir.path()).unwrap();
        store
            .apply(
                &[
                    commit(1, &all, "10"),
                    synced("11"),
                    WriteOp::Lost { set: all.clone() },
                    synced("13"),
                ],
                true,
            )
            .unwrap();
        assert!(
            !store.apply(&[synced("14")], false).unwrap(),
            "nothing to write"
        );
    }
    let store = RedbStore::open(dir.path()).unwrap();
    let meta = store.sets("").unwrap()[0].1.clone();
    assert_eq!((meta.resource_version.as_str(), meta.stale), ("11", true));
    store
        .apply(&[commit(2, &all, "20"), synced("21")], true)
        .unwrap();
    let meta = store.sets("").unwrap()[0].1.clone();
    assert_eq!((meta.resource_version.as_str(), meta.stale), ("21", false));
}

#[test]
fn a_sets_oldest_departures_are_pruned_and_its_history_then_starts_later() {
    let all = SetKey::new(services(), "", "", "");
    let (_dir, store) = store_with(&[commit(1, &all, "1")]);
    let count = history::MAX_TOMBSTONES as u32 + 1;
    let ops: Vec<WriteOp> = (0..count)
        .map(|i| WriteOp::Remove {
            set: all.clone(),
            key: services().object_key("a", &format!("o{i}")),
            object: svc("a", &format!("o{i}"), 10 + i, ""),
            resource_version: (10 + i).to_string(),
        })
        .collect();
    store.apply(&ops, true).unwrap();
    let kept = store.history(&all).unwrap().len() as u64;
    let meta = store.sets("").unwrap()[0].1.clone();
    assert_eq!(kept, history::MAX_TOMBSTONES / 2);
    assert_eq!(meta.tombstones, kept);
    let newest_dropped = 10 + count - 1 - kept as u32;
    assert_eq!(meta.history_from, newest_dropped.to_string());
}

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
    assert!(!store.apply(&nothing, false).unwrap());
    assert!(store.apply(&nothing, true).unwrap());
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
        assert!(store.apply(&batch, false).unwrap(), "{batch:?}");
    }
    assert_eq!(store.get(&key).unwrap().unwrap(), svc("a", "x", 6, ""));
    assert_eq!(store.sets("").unwrap()[0].1.resource_version, "11");
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
