//! Garbage collection: a component the node no longer runs stops being served, and its
//! cache is removed once it has not been used for `--cache-gc-after`. (YurtHub never does.)

use std::time::Duration;

use super::store::Store;
use super::writer::Cache;

/// Removes every component last used longer than `after` ago; returns their names.
pub fn collect_garbage(cache: &Cache, after: Duration) -> Vec<String> {
    let store: &dyn Store = cache.store().as_ref();
    let cutoff = super::now().saturating_sub(after.as_secs());
    let components = match store.components() {
        Ok(components) => components,
        Err(error) => {
            tracing::warn!(error = %crate::error_chain(&error), "cannot list cached components");
            return Vec::new();
        }
    };
    let mut removed = Vec::new();
    for (component, last_used) in components {
        if last_used >= cutoff {
            continue;
        }
        match store.remove_component(&component) {
            Ok(objects) => {
                tracing::info!(%component, objects, "removed the cache of a component unused since {last_used}");
                cache.metrics().collected.inc();
                removed.push(component);
            }
            Err(error) => {
                tracing::warn!(%component, error = %crate::error_chain(&error), "cannot remove a component's cache");
            }
        }
    }
    removed
}
