//! A page of a cached list, as kube-apiserver pages one: the members from a key on, in key
//! order, at most `limit` of them, with how many follow; and, for a page that must hold at
//! an older version (a continue token's, an `Exact` read's), the proof that the cache still
//! holds what the set held then.

use bytes::Bytes;

use super::key::{ResourceKey, SetKey};
use super::read::{ReadError, Scope, covering, members, version_of};
use super::selectors::Selectors;
use super::store::{History, SetMeta, Store, StoreError};
use crate::stream::compare_versions;

/// Where a page starts, how long it is, and the version it must hold at.
#[derive(Clone, Copy, Debug)]
pub struct PageSpec<'a> {
    /// The first key the page may hold, relative to the scope's namespace (`ns/name`, or
    /// `name` in a namespace), as kube-apiserver's continue tokens name it; `None` from the
    /// first member.
    pub from: Option<&'a str>,
    /// At most this many items.
    pub limit: usize,
    /// The version the page must be exact at; `None` for the set as it is.
    pub exact_at: Option<u64>,
}

/// A page of a cached list.
pub struct Page {
    /// The set's metadata (kind, apiVersion, synced resourceVersion).
    pub meta: SetMeta,
    /// The page's items, streamed from the store.
    pub items: Box<dyn Iterator<Item = Result<Bytes, StoreError>> + Send>,
    /// The relative key of the page's last item, when more items follow it.
    pub last: Option<String>,
    /// How many items follow the page.
    pub remaining: u64,
}

/// The page of the cached list of `resource` in `scope` that `spec` asks for. The store is
/// read twice: once to find where the page ends (and, for an exact page, that no member
/// from `from` on changed, entered or left after its version), then to stream it.
pub fn page(
    store: &dyn Store,
    resource: &ResourceKey,
    scope: Scope<'_>,
    spec: PageSpec<'_>,
) -> Result<Page, ReadError> {
    let (set, meta) = covering(store, resource, scope)?;
    let prefix = resource.namespace_prefix(scope.namespace);
    let in_page = move |key: &str, from: Option<&str>| {
        let relative = key.strip_prefix(prefix.as_str()).unwrap_or(key);
        from.is_none_or(|from| relative >= from)
    };
    if let Some(at) = spec.exact_at {
        held_at(store, &set, &meta, scope, at, |key| in_page(key, spec.from))?;
    }
    let (mut count, mut last) = (0u64, None);
    for entry in members(store, resource, &set, scope)? {
        let (key, object) = entry?;
        if !in_page(&key, spec.from) {
            continue;
        }
        if let Some(at) = spec.exact_at
            && !at_or_before(&version_of(&object), at)
        {
            return Err(inexact(at));
        }
        count += 1;
        if count == spec.limit as u64 {
            last = Some(key);
        }
    }
    let remaining = count.saturating_sub(spec.limit as u64);
    let last = last.filter(|_| remaining > 0);
    let prefix = resource.namespace_prefix(scope.namespace);
    let end = last.clone();
    let from = spec.from.map(str::to_owned);
    let items = members(store, resource, &set, scope)?
        .filter(move |entry| {
            entry.as_ref().map_or(true, |(key, _)| {
                let relative = key.strip_prefix(prefix.as_str()).unwrap_or(key);
                from.as_deref().is_none_or(|from| relative >= from)
            })
        })
        .take_while(move |entry| {
            // The page ends with its last item; a read error ends it too, once sent.
            entry.as_ref().map_or(true, |(key, _)| {
                end.as_deref().is_none_or(|end| key.as_str() <= end)
            })
        })
        .map(|entry| entry.map(|(_, object)| object));
    let prefix = resource.namespace_prefix(scope.namespace);
    let last = last.map(|key| key.strip_prefix(prefix.as_str()).unwrap_or(&key).to_owned());
    Ok(Page {
        meta,
        items: Box::new(items),
        last,
        remaining,
    })
}

/// Checks that the set's history proves nothing `in_range` left it after `at`, and that
/// `at` lies within what the set knows: from where its history starts to its version.
fn held_at(
    store: &dyn Store,
    set: &SetKey,
    meta: &SetMeta,
    scope: Scope<'_>,
    at: u64,
    in_range: impl Fn(&str) -> bool,
) -> Result<(), ReadError> {
    let from = if meta.history_from.is_empty() {
        &meta.resource_version
    } else {
        &meta.history_from
    };
    let reaches_back = at_or_before(from, at);
    let synced_since =
        compare_versions(&at.to_string(), &meta.resource_version).is_some_and(|o| o.is_le());
    if !(reaches_back && synced_since) {
        return Err(inexact(at));
    }
    let selection = Selectors::new(scope.labels, scope.fields)?;
    for (key, entry) in store.history(set)? {
        if let History::Left(last) = entry
            && in_range(&key)
            && selection.matches(&last)
            && !at_or_before(&version_of(&last), at)
        {
            return Err(inexact(at));
        }
    }
    Ok(())
}

/// Whether `version` is known to be at or before `at`.
fn at_or_before(version: &str, at: u64) -> bool {
    compare_versions(version, &at.to_string()).is_some_and(|o| o.is_le())
}

fn inexact(at: u64) -> ReadError {
    ReadError::Changed { at: at.to_string() }
}

#[cfg(test)]
mod tests;
