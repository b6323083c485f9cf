//! Reading the cache the way the local proxy asks: a list (from a set that covers it,
//! narrowed by the request's selectors), and the backlog an offline watch starts with.
//! Items are streamed from the store, never gathered.

use bytes::Bytes;
use thiserror::Error;

use super::key::{ResourceKey, SetKey};
use super::selection::{Selection, SelectionError};
use super::store::{SetMeta, Store, StoreError};
use crate::stream::{Meta, compare_versions};

/// Why the cache cannot answer.
#[derive(Debug, Error)]
pub enum ReadError {
    /// No committed list covers the request.
    #[error("no list covering this request has been cached")]
    NotCached,
    /// The request's selectors cannot be read.
    #[error(transparent)]
    Selection(#[from] SelectionError),
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
    select(store, resource, scope, None)
}

/// The cached objects of `scope` changed after resourceVersion `since`: what an offline
/// watch sends before it waits.
pub fn watch_backlog(
    store: &dyn Store,
    resource: &ResourceKey,
    scope: Scope<'_>,
    since: &str,
) -> Result<Listing, ReadError> {
    select(store, resource, scope, Some(since.to_owned()))
}

fn select(
    store: &dyn Store,
    resource: &ResourceKey,
    scope: Scope<'_>,
    since: Option<String>,
) -> Result<Listing, ReadError> {
    let (set, meta) = store
        .sets(&SetKey::resource_prefix(resource))?
        .into_iter()
        .filter(|(set, _)| set.covers(scope.namespace, scope.labels, scope.fields))
        .max_by(|(_, a), (_, b)| {
            compare_versions(&a.resource_version, &b.resource_version)
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .ok_or(ReadError::NotCached)?;
    let selection = Selection::new(scope.labels, scope.fields)?;
    let objects = store.scan(&resource.namespace_prefix(scope.namespace))?;
    let items = objects.filter_map(move |entry| match entry {
        Err(error) => Some(Err(error)),
        Ok((_, object)) => {
            let newer = since
                .as_deref()
                .is_none_or(|since| is_newer(&object, since));
            (newer && selection.matches(&object)).then_some(Ok(object))
        }
    });
    Ok(Listing {
        set,
        meta,
        items: Box::new(items),
    })
}

fn is_newer(object: &[u8], since: &str) -> bool {
    Meta::parse(object)
        .is_ok_and(|meta| compare_versions(&meta.resource_version, since).is_none_or(|o| o.is_gt()))
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn a_watch_backlog_holds_what_changed_after_the_clients_version() {
        let (_dir, store) = store();
        assert_eq!(
            names(watch_backlog(&store, &pods(), scope("", "", ""), "10").unwrap()),
            ["db-1", "web-2"]
        );
        assert!(names(watch_backlog(&store, &pods(), scope("", "", ""), "12").unwrap()).is_empty());
    }
}
