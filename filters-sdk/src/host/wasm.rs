//! The world's imports, in the SDK's types: what [`crate::host`] calls in wasm builds.

use crate::bindings::edgegate::filter::host;
use crate::bindings::edgegate::filter::types as wit;
use crate::types::Level;

pub(crate) fn get(
    group: &str,
    version: &str,
    resource: &str,
    namespace: Option<&str>,
    name: &str,
) -> Option<Vec<u8>> {
    host::get(group, version, resource, namespace, name)
}

pub(crate) fn list(
    group: &str,
    version: &str,
    resource: &str,
    namespace: Option<&str>,
    selector: &str,
) -> Vec<Vec<u8>> {
    host::list(group, version, resource, namespace, selector)
}

fn level_to_wit(level: Level) -> wit::Level {
    match level {
        Level::Trace => wit::Level::Trace,
        Level::Debug => wit::Level::Debug,
        Level::Info => wit::Level::Info,
        Level::Warn => wit::Level::Warn,
        Level::Error => wit::Level::Error,
    }
}

pub(crate) fn log(level: Level, message: &str) {
    host::log(level_to_wit(level), message);
}

pub(crate) fn log_enabled(level: Level) -> bool {
    host::log_enabled(level_to_wit(level))
}

pub(crate) fn count(name: &str, delta: u64) {
    host::count(name, delta);
}
