//! Reading the cache the way the local proxy asks: a list (from a set that covers it,
//! narrowed by the request's selectors), and the backlog an offline watch starts with: the
//! set's changes after the client's resourceVersion, replayed from its history. List items
//! are streamed from the store, never gathered.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use thiserror::Error;

use super::key::{ResourceKey, SetKey};
use super::selectors::{SelectorError, Selectors};
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
    Selector(#[from] SelectorError),
    /// A watch from a resourceVersion the cache cannot replay exactly from (older than the
    /// set's history, or newer than a stale set): the client must re-list.
    #[error("too old resource version {since}: the local cache holds changes from {from} on")]
    Expired {
        /// The client's resourceVersion.
        since: String,
        /// Where the cache's history starts.
        from: String,
    },
    /// A read at an older version (a continue token's, an `Exact` one) the cache cannot
    /// prove it still holds: a member changed, entered or left after it, or the set's
    /// history does not reach back to it.
    #[error("the cached list has changed since resourceVersion {at}")]
    Changed {
        /// The version asked for.
        at: String,
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
    let selection = Selectors::new(scope.labels, scope.fields)?;
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
pub(super) fn covering(
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
pub(super) fn members(
    store: &dyn Store,
    resource: &ResourceKey,
    set: &SetKey,
    scope: Scope<'_>,
) -> Result<impl Iterator<Item = Result<(String, Bytes), StoreError>> + Send + 'static, ReadError> {
    let selection = Selectors::new(scope.labels, scope.fields)?;
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
pub(super) fn version_of(object: &[u8]) -> String {
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
pub(super) mod tests;
