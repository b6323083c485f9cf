//! Reading the cache the way the local proxy asks: a list (from a set that covers it,
//! narrowed by the request's selectors), and the backlog an offline watch starts with: the
//! set's changes after the client's resourceVersion, replayed from its history. List items
//! are streamed from the store, never gathered.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use thiserror::Error;

use super::key::{ResourceKey, SetKey};
use super::selection::{Selection, SelectionError};
use super::store::{History, SetMeta, Store, StoreError};
use crate::stream::{Event, EventType, Meta, compare_versions};

/// Why the cache cannot answer.
#[derive(Debug, Error)]
pub enum ReadError {
    /// No committed list covers the request.
    #[error("no list covering this request has been cached")]
    NotCached,
    /// The request's selectors cannot be read.
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// A watch from a resourceVersion the cache cannot replay exactly from (older than the
    /// set's history, or newer than a stale set): the client must re-list.
    #[error("too old resource version {since}: the local cache holds changes from {from} on")]
    Expired {
        /// The client's resourceVersion.
        since: String,
        /// Where the cache's history starts.
        from: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A cached list: the set it comes from and its items.
pub struct Listing {
    /// The set that covers the request.
    pub set: SetKey,
    /// Its metadata (kind, apiVersion, synced resourceVersion).
    pub meta: SetMeta,
    /// The selected items, streamed from the store.
    pub items: Box<dyn Iterator<Item = Result<Bytes, StoreError>> + Send>,
}

/// What an offline watch sends before it waits: the set's events after the client's
/// resourceVersion, in resourceVersion order.
pub struct Backlog {
    /// The set's metadata (kind, apiVersion, synced resourceVersion).
    pub meta: SetMeta,
    /// The events.
    pub events: Box<dyn Iterator<Item = Result<Event, StoreError>> + Send>,
}

/// What a request asks of a resource.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// The namespace; empty for all.
    pub namespace: &'a str,
    /// The label selector.
    pub labels: &'a str,
    /// The field selector.
    pub fields: &'a str,
}

/// The cached answer to a list of `resource` in `scope`.
pub fn list(
    store: &dyn Store,
    resource: &ResourceKey,
    scope: Scope<'_>,
) -> Result<Listing, ReadError> {
    let (set, meta) = covering(store, resource, scope)?;
    let items = members(store, resource, &set, scope)?.map(|entry| entry.map(|(_, o)| o));
    Ok(Listing {
        set,
        meta,
        items: Box::new(items),
    })
}

/// What an offline watch of `scope` from resourceVersion `since` sends first: with no
/// version (or `0`), every member as ADDED; otherwise each member changed after `since`
/// (ADDED when its set's watch saw it enter after `since`, else MODIFIED) and each member
/// that left after it (DELETED, with its last state), in resourceVersion order.
pub fn watch_backlog(
    store: &Arc<dyn Store>,
    resource: &ResourceKey,
    scope: Scope<'_>,
    since: &str,
) -> Result<Backlog, ReadError> {
    let (set, meta) = covering(store.as_ref(), resource, scope)?;
    let members = members(store.as_ref(), resource, &set, scope)?;
    if since.is_empty() || since == "0" {
        let events = members.map(|entry| entry.map(|(_, object)| event(EventType::Added, object)));
        return Ok(Backlog {
            meta,
            events: Box::new(events),
        });
    }
    let from = if meta.history_from.is_empty() {
        &meta.resource_version
    } else {
        &meta.history_from
    };
    let too_old = compare_versions(since, from).is_some_and(|o| o.is_lt());
    // A stale set is consistent up to its version only.
    let past_a_hole =
        meta.stale && compare_versions(since, &meta.resource_version).is_some_and(|o| o.is_gt());
    if too_old || past_a_hole {
        return Err(ReadError::Expired {
            since: since.to_owned(),
            from: from.clone(),
        });
    }
    let history = store.history(&set)?;
    let mut entered = HashMap::new();
    let mut changes: Vec<(u64, Change)> = Vec::new();
    let selection = Selection::new(scope.labels, scope.fields)?;
    let prefix = resource.namespace_prefix(scope.namespace);
    for (key, entry) in history {
        match entry {
            History::Entered(rv) => {
                entered.insert(key, rv);
            }
            History::Left(last) => {
                let rv = version_of(&last);
                if is_after(&rv, since) && key.starts_with(&prefix) && selection.matches(&last) {
                    changes.push((number(&rv), Change::Left(last)));
                }
            }
        }
    }
    for entry in members {
        let (key, object) = entry?;
        let rv = version_of(&object);
        if is_after(&rv, since) {
            let kind = match entered.get(&key) {
                Some(entered) if is_after(entered, since) => EventType::Added,
                _ => EventType::Modified,
            };
            changes.push((number(&rv), Change::Member(kind, key)));
        }
    }
    changes.sort_by_key(|(rv, _)| *rv);
    let store = store.clone();
    let events = changes
        .into_iter()
        .filter_map(move |(_, change)| match change {
            Change::Left(last) => Some(Ok(event(EventType::Deleted, last))),
            // Read again when sent, so a long backlog is not held whole; gone meanwhile: skipped.
            Change::Member(kind, key) => store
                .get(&key)
                .transpose()
                .map(|object| object.map(|object| event(kind, object))),
        });
    Ok(Backlog {
        meta,
        events: Box::new(events),
    })
}
/// A change a backlog replays.
enum Change {
    /// A member, by key, as an ADDED or MODIFIED event.
    Member(EventType, String),
    /// A departure, with the member's last state.
    Left(Bytes),
}

/// The set that covers a request of `resource` in `scope` and is synced furthest.
fn covering(
    store: &dyn Store,
    resource: &ResourceKey,
    scope: Scope<'_>,
) -> Result<(SetKey, SetMeta), ReadError> {
    store
        .sets(&SetKey::resource_prefix(resource))?
        .into_iter()
        .filter(|(set, _)| set.covers(scope.namespace, scope.labels, scope.fields))
        .max_by(|(_, a), (_, b)| {
            compare_versions(&a.resource_version, &b.resource_version)
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .ok_or(ReadError::NotCached)
}

/// The members of `set` that `scope` selects, by key, streamed from the store: the stored
/// objects under the scope's namespace that its selectors select, but for those the set's
/// history says have left it.
fn members(
    store: &dyn Store,
    resource: &ResourceKey,
    set: &SetKey,
    scope: Scope<'_>,
) -> Result<impl Iterator<Item = Result<(String, Bytes), StoreError>> + Send + 'static, ReadError> {
    let selection = Selection::new(scope.labels, scope.fields)?;
    let departed: HashMap<String, History> = store
        .history(set)?
        .into_iter()
        .filter(|(_, entry)| matches!(entry, History::Left(_)))
        .collect();
    let objects = store.scan(&resource.namespace_prefix(scope.namespace))?;
    Ok(objects.filter(move |entry| {
        entry.as_ref().map_or(true, |(key, object)| {
            selection.matches(object) && !departed.get(key).is_some_and(|d| d.hides(object))
        })
    }))
}

fn event(kind: EventType, object: Bytes) -> Event {
    Event { kind, object }
}

/// An object's resourceVersion; empty when it cannot be read.
fn version_of(object: &[u8]) -> String {
    Meta::parse(object).map_or_else(|_| String::new(), |m| m.resource_version.into_owned())
}

/// Whether `version` is after `since` (versions that cannot be compared are).
fn is_after(version: &str, since: &str) -> bool {
    compare_versions(version, since).is_none_or(|o| o.is_gt())
}

/// A resourceVersion as a number to order events by (etcd's are; others go first).
fn number(version: &str) -> u64 {
    version.parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::key::SetKey;
    use crate::cache::redb_store::RedbStore;
    use crate::cache::store::WriteOp;

    fn pods() -> ResourceKey {
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

    fn store() -> (tempfile::TempDir, RedbStore) {
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

    fn scope<'a>(namespace: &'a str, labels: &'a str, fields: &'a str) -> Scope<'a> {
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
            Err(ReadError::Selection(_))
        ));
    }

    fn pod_bytes(ns: &str, name: &str, rv: u32, app: &str) -> Bytes {
        Bytes::from(format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"{rv}","labels":{{"app":"{app}"}}}}}}"#
        ))
    }

    /// The backlog of `since` as (type, name, resourceVersion).
    fn backlog(
        store: &Arc<dyn Store>,
        scope: Scope<'_>,
        since: &str,
    ) -> Vec<(String, String, String)> {
        let backlog = watch_backlog(store, &pods(), scope, since).unwrap();
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
    fn watched() -> (tempfile::TempDir, Arc<dyn Store>) {
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
            watch_backlog(&store, &pods(), all, "11"),
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
            watch_backlog(&store, &pods(), all, "16"),
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
}
