//! [`Lookup`]: the read-only lookups of other objects a filter's `get` and `list` imports
//! make. The filter host defines it; the server wires the cache and informers in behind it.

use std::sync::Arc;

use bytes::Bytes;
use edgegate_filter_sdk::LabelSelector;

/// Read-only lookups of other objects the gateway knows, behind the `get` and `list`
/// imports. The server wires the cache and informers in behind it.
pub trait Lookup: Send + Sync {
    /// One object as JSON; `None` if unknown.
    fn get(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Bytes>;

    /// The objects of a resource (in a namespace, or all with `None`) whose labels match.
    fn list(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Vec<Bytes>;

    /// How many changes to what lookups read have begun: it grows before each is applied, so
    /// a call that read what a change made reads the epoch at or past that change's
    /// ([`LookupChange::epoch`]) once it returns. Constant where nothing changes.
    fn epoch(&self) -> u64 {
        0
    }

    /// The change feed that announces changes to `resource` of `group` (a bit number below
    /// 64), so watches whose filters looked it up can be re-listed; `None` if changes to it
    /// are not announced.
    fn feed(&self, _group: &str, _resource: &str) -> Option<u32> {
        None
    }

    /// The feed and the key (`namespace/name`, the namespace empty for a cluster-scoped
    /// kind) under which a change to the object a `get` asks for is announced.
    fn key(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<(u32, String)> {
        let feed = self.feed(group, resource)?;
        Some((feed, format!("{}/{name}", namespace.unwrap_or_default())))
    }
}

/// A change to what lookups read, as a [`Lookup`]'s feeds announce it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupChange {
    /// The feed ([`Lookup::feed`]).
    pub feed: u32,
    /// The object that changed ([`Lookup::key`]); `None` when any of the feed's may have.
    pub key: Option<Arc<str>>,
    /// The [`Lookup::epoch`] the change began at: a filtering recorded at an earlier epoch
    /// read what was before it.
    pub epoch: u64,
}

/// What one call's lookups read: whole feeds (a `list`, a mask) and objects by key (a `get`).
#[derive(Debug, Default)]
pub(crate) struct CallReads {
    /// Feeds a `list` read, bit `i` = feed `i`.
    pub(crate) feeds: u64,
    /// Objects a `get` read: feed and key.
    pub(crate) keys: Vec<(u32, String)>,
}

impl CallReads {
    /// Forgets what the last call read.
    pub(crate) fn clear(&mut self) {
        self.feeds = 0;
        self.keys.clear();
    }
}

/// A [`Lookup`] that knows no objects.
pub struct NoLookup;

impl Lookup for NoLookup {
    fn get(&self, _: &str, _: &str, _: &str, _: Option<&str>, _: &str) -> Option<Bytes> {
        None
    }

    fn list(&self, _: &str, _: &str, _: &str, _: Option<&str>, _: &LabelSelector) -> Vec<Bytes> {
        Vec::new()
    }
}
