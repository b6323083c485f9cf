//! Where filters come from: the watched directory, the operator's settings, and loading one
//! filter off the hot path.
//!
//! # Layout
//! - `dir`: reading and hashing the directory. `dir_watch`: watching it.
//! - `loader`: compile, link, manifest, settings, schema check, configure.
//! - `loaded_filter`: a loaded filter and its pool of instances.
//! - `options`: `NAME.toml` and the gateway filter config; the settings a filter runs with.
//! - `schema`: config validation against the manifest's JSON Schema.
//! - `tripwire`: a filter's recent failures, which turn it off at its `[disable-after]`.

pub(super) mod dir;
pub(super) mod dir_watch;
pub(super) mod loaded_filter;
pub(super) mod loader;
pub(super) mod options;
pub(super) mod schema;
pub(super) mod tripwire;
