//! [`Lookup`]: the read-only lookups of other objects a filter's `get` and `list` imports
//! make. The filter host defines it; the server wires the cache and informers in behind it.

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

    /// The change feed that announces changes to `resource` of `group` (a bit number below
    /// 64), so watches whose filters looked it up can be re-listed; `None` if changes to it
    /// are not announced.
    fn feed(&self, _group: &str, _resource: &str) -> Option<u32> {
        None
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
