//! Histories: departures from sets, deletions, lost events, pruning.

use super::*;

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
            !store.apply(&[synced("14")], false).unwrap().wrote,
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
