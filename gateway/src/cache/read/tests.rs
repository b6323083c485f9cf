use super::*;
use crate::cache::StoreWriter;
use crate::cache::key::SetKey;
use crate::cache::redb_store::RedbStore;
use crate::cache::store::WriteOp;

pub(crate) fn pods() -> ResourceKey {
    ResourceKey {
        component: "kubelet".into(),
        resource: "pods".into(),
        version: "v1".into(),
        group: String::new(),
    }
}

fn pod(ns: &str, name: &str, rv: u32, app: &str, node: &str) -> WriteOp {
    WriteOp::Stage {
        list: 1,
        key: pods().object_key(ns, name),
        object: Bytes::from(format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"{rv}","labels":{{"app":"{app}"}}}},"spec":{{"nodeName":"{node}"}}}}"#
        )),
    }
}

pub(crate) fn store() -> (tempfile::TempDir, RedbStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    store
        .apply(
            &[
                pod("a", "web-1", 10, "web", "edge-1"),
                pod("a", "db-1", 11, "db", "edge-1"),
                pod("b", "web-2", 12, "web", "edge-2"),
                WriteOp::Commit {
                    list: 1,
                    set: SetKey::new(pods(), "", "", ""),
                    meta: SetMeta {
                        resource_version: "12".into(),
                        list_kind: "PodList".into(),
                        api_version: "v1".into(),
                        ..SetMeta::default()
                    },
                },
            ],
            true,
        )
        .unwrap();
    (dir, store)
}

fn names(listing: Listing) -> Vec<String> {
    listing
        .items
        .map(|item| Meta::parse(&item.unwrap()).unwrap().name.into_owned())
        .collect()
}

pub(crate) fn scope<'a>(namespace: &'a str, labels: &'a str, fields: &'a str) -> Scope<'a> {
    Scope {
        namespace,
        labels,
        fields,
    }
}

#[test]
fn lists_are_narrowed_by_namespace_and_selectors() {
    let (_dir, store) = store();
    let names_of =
        |ns, labels, fields| names(list(&store, &pods(), scope(ns, labels, fields)).unwrap());
    assert_eq!(names_of("", "", ""), ["db-1", "web-1", "web-2"]);
    assert_eq!(names_of("a", "", ""), ["db-1", "web-1"]);
    assert_eq!(names_of("", "app=web", ""), ["web-1", "web-2"]);
    assert_eq!(names_of("", "app!=web", "spec.nodeName=edge-1"), ["db-1"]);
    let listing = list(&store, &pods(), scope("", "", "")).unwrap();
    assert_eq!(
        (
            listing.meta.list_kind.as_str(),
            listing.meta.resource_version.as_str()
        ),
        ("PodList", "12")
    );
}

#[test]
fn a_list_nothing_covers_is_not_cached() {
    let (_dir, store) = store();
    let other = ResourceKey {
        resource: "secrets".into(),
        ..pods()
    };
    assert!(matches!(
        list(&store, &other, scope("", "", "")),
        Err(ReadError::NotCached)
    ));
    assert!(matches!(
        list(&store, &pods(), scope("", "app in (", "")),
        Err(ReadError::Selector(_))
    ));
}

fn pod_bytes(ns: &str, name: &str, rv: u32, app: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"{rv}","labels":{{"app":"{app}"}}}}}}"#
    ))
}

/// The backlog of `since` as (type, name, resourceVersion).
fn backlog(store: &Arc<RedbStore>, scope: Scope<'_>, since: &str) -> Vec<(String, String, String)> {
    let backlog = watch_backlog(&reader(store), &pods(), scope, since).unwrap();
    backlog
        .events
        .map(|event| {
            let event = event.unwrap();
            let meta = Meta::parse(&event.object).unwrap();
            (
                event.kind.as_str().to_owned(),
                meta.name.into_owned(),
                meta.resource_version.into_owned(),
            )
        })
        .collect()
}

fn triple(kind: &str, name: &str, rv: &str) -> (String, String, String) {
    (kind.to_owned(), name.to_owned(), rv.to_owned())
}

/// The store of [`store`] after its watch saw db-2 added at 13, web-1 modified at 14
/// and db-1 deleted at 15.
/// The read half of `store`, as the local proxy has it.
pub(crate) fn reader(store: &Arc<RedbStore>) -> Arc<dyn Store> {
    store.clone()
}

pub(crate) fn watched() -> (tempfile::TempDir, Arc<RedbStore>) {
    let (dir, store) = store();
    let all = SetKey::new(pods(), "", "", "");
    let upsert = |name: &str, rv: u32, app: &str| WriteOp::Upsert {
        key: pods().object_key("a", name),
        object: pod_bytes("a", name, rv, app),
        resource_version: rv.to_string(),
    };
    store
        .apply(
            &[
                WriteOp::Entered {
                    set: all.clone(),
                    key: pods().object_key("a", "db-2"),
                    resource_version: "13".into(),
                },
                upsert("db-2", 13, "db"),
                upsert("web-1", 14, "web"),
                WriteOp::Remove {
                    set: all.clone(),
                    key: pods().object_key("a", "db-1"),
                    object: pod_bytes("a", "db-1", 15, "db"),
                    resource_version: "15".into(),
                },
                WriteOp::Synced {
                    set: all,
                    resource_version: "15".into(),
                },
            ],
            true,
        )
        .unwrap();
    (dir, Arc::new(store))
}

#[test]
fn a_watch_backlog_replays_what_was_added_modified_and_deleted_after_the_clients_version() {
    let (_dir, store) = watched();
    let all = scope("", "", "");
    assert_eq!(
        backlog(&store, all, "12"),
        [
            triple("ADDED", "db-2", "13"),
            triple("MODIFIED", "web-1", "14"),
            triple("DELETED", "db-1", "15"),
        ]
    );
    // db-2 entered at 13: a client at 13 has it, and sees no more of it.
    assert_eq!(
        backlog(&store, all, "13"),
        [
            triple("MODIFIED", "web-1", "14"),
            triple("DELETED", "db-1", "15")
        ]
    );
    // The request's selectors narrow the departures too.
    assert_eq!(
        backlog(&store, scope("a", "app=db", ""), "12"),
        [
            triple("ADDED", "db-2", "13"),
            triple("DELETED", "db-1", "15")
        ]
    );
    assert!(backlog(&store, all, "15").is_empty());
    // No version: the set as it is, every member ADDED.
    assert_eq!(
        backlog(&store, all, ""),
        [
            triple("ADDED", "db-2", "13"),
            triple("ADDED", "web-1", "14"),
            triple("ADDED", "web-2", "12"),
        ]
    );
    // The history starts at the set's first list.
    let listed = store.sets("").unwrap()[0].1.clone();
    assert_eq!(listed.history_from, "12");
}

#[test]
fn a_watch_from_before_the_history_or_past_a_hole_is_expired() {
    let (_dir, store) = watched();
    let all = scope("", "", "");
    assert!(matches!(
        watch_backlog(&reader(&store), &pods(), all, "11"),
        Err(ReadError::Expired { .. })
    ));
    store
        .apply(
            &[WriteOp::Lost {
                set: SetKey::new(pods(), "", "", ""),
            }],
            true,
        )
        .unwrap();
    // Stale at 15: a client that saw more cannot be answered exactly; one at 15 can.
    assert!(matches!(
        watch_backlog(&reader(&store), &pods(), all, "16"),
        Err(ReadError::Expired { .. })
    ));
    assert!(backlog(&store, all, "15").is_empty());
}

#[test]
fn a_member_that_left_a_selector_set_is_not_listed_there_but_stays_in_the_others() {
    let (_dir, store) = store();
    let web = SetKey::new(pods(), "", "app=web", "");
    store
        .apply(
            &[
                pod("a", "web-1", 10, "web", "edge-1"),
                pod("b", "web-2", 12, "web", "edge-2"),
                WriteOp::Commit {
                    list: 1,
                    set: web.clone(),
                    meta: SetMeta {
                        resource_version: "12".into(),
                        ..SetMeta::default()
                    },
                },
                // "No longer app=web" at 13, its new labels not seen yet.
                WriteOp::Remove {
                    set: web,
                    key: pods().object_key("a", "web-1"),
                    object: pod_bytes("a", "web-1", 13, "web"),
                    resource_version: "13".into(),
                },
            ],
            true,
        )
        .unwrap();
    let names_of = |labels| names(list(&store, &pods(), scope("", labels, "")).unwrap());
    assert_eq!(names_of("app=web"), ["web-2"]);
    assert_eq!(names_of(""), ["db-1", "web-1", "web-2"]);
}

/// A lagging watch of the set (one of many at different positions) tees db-2's ADDED at
/// 13 after a watch ahead of it teed its DELETED at 16: the departure must stay in the
/// history, or a client at 14 replaying offline is moved past it without being told.
#[test]
fn a_lagging_watchs_added_does_not_erase_a_later_departure() {
    let (_dir, store) = watched();
    let all = SetKey::new(pods(), "", "", "");
    let db2 = pods().object_key("a", "db-2");
    let added = |rv: u32| {
        [
            WriteOp::Entered {
                set: all.clone(),
                key: db2.clone(),
                resource_version: rv.to_string(),
            },
            WriteOp::Upsert {
                key: db2.clone(),
                object: pod_bytes("a", "db-2", rv, "db"),
                resource_version: rv.to_string(),
            },
        ]
    };
    let removed = WriteOp::Remove {
        set: all.clone(),
        key: db2.clone(),
        object: pod_bytes("a", "db-2", 16, "db"),
        resource_version: "16".into(),
    };
    store.apply(&[removed], true).unwrap();
    store.apply(&added(13), true).unwrap();
    assert_eq!(store.get(&db2).unwrap(), None);
    assert_eq!(
        backlog(&store, scope("", "", ""), "14"),
        [
            triple("DELETED", "db-1", "15"),
            triple("DELETED", "db-2", "16")
        ]
    );
    // Created again under the same name later: it entered again, and is ADDED.
    store.apply(&added(17), true).unwrap();
    assert_eq!(
        backlog(&store, scope("", "", ""), "16"),
        [triple("ADDED", "db-2", "17")]
    );
}
