//! What the gateway grants a filter: read-only lookups of other objects it knows (served from
//! its cache and informers, so they work offline), logging and counters. Nothing else.
//!
//! In a wasm build these call the component's imports; natively they are served by the
//! [`crate::testing::Harness`] of the calling thread (and do nothing without one).

#[cfg(not(target_family = "wasm"))]
pub(crate) mod fake;
#[cfg(target_family = "wasm")]
pub(crate) mod wasm;

#[cfg(not(target_family = "wasm"))]
use self::fake as backend;
#[cfg(target_family = "wasm")]
use self::wasm as backend;
use crate::object::Object;
use crate::types::{Level, Resource};

/// One object of `resource` by namespace (`None` when cluster-scoped) and name; `None` if
/// the gateway does not know it (or it is not a JSON object).
pub fn get(resource: Resource, namespace: Option<&str>, name: &str) -> Option<Object> {
    let Resource {
        group,
        version,
        resource,
    } = resource;
    let bytes = backend::get(group, version, resource, namespace, name)?;
    Object::from_vec(bytes).ok()
}

/// The objects of a resource (in one namespace, or in all with `None`) whose labels match a
/// Kubernetes label selector (`app=web,tier!=db`; empty matches all).
///
/// A selector that does not parse traps the call (see [`crate::selector`] for the syntax).
pub fn list(resource: Resource, namespace: Option<&str>, label_selector: &str) -> Vec<Object> {
    let Resource {
        group,
        version,
        resource,
    } = resource;
    backend::list(group, version, resource, namespace, label_selector)
        .into_iter()
        .filter_map(|bytes| Object::from_vec(bytes).ok())
        .collect()
}

/// Writes a line to the gateway's log, tagged with the filter's name.
pub fn log(level: Level, message: &str) {
    backend::log(level, message);
}

/// Whether [`log`] at `level` would write a line now: check it before building a message
/// that is expensive to format or written for every object, as a debug line often is.
///
/// ```text
/// if host::log_enabled(Level::Debug) {
///     host::log(Level::Debug, &format!("pruned {}/{}", namespace, name));
/// }
/// ```
pub fn log_enabled(level: Level) -> bool {
    backend::log_enabled(level)
}

/// Adds `delta` to the counter `name`, exported as a metric labelled with the filter.
pub fn count(name: &str, delta: u64) {
    backend::count(name, delta);
}
