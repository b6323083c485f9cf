//! Where filters come from: the watched directory, the operator's settings, and loading a
//! changed directory off the hot path into a new generation of the chain.
//!
//! # Layout
//! - `dir`: reading and hashing the directory. `dir_watch`: watching it.
//! - `reload`: [`Filters`](reload::Filters), rescanning the directory and swapping generations.
//! - `loader`: compile, link, manifest, settings, schema check, configure.
//! - `loaded_filter`: a loaded filter and its pool of instances.
//! - `options`: `NAME.toml` and the gateway filter config; the settings a filter runs with.
//! - `schema`: config validation against the manifest's JSON Schema.
//! - `helper_process`: compiling and config checks handed to a child process.
//! - `describe`: the live chain as JSON.

pub(super) mod describe;
pub(super) mod dir;
pub(super) mod dir_watch;
pub(super) mod helper_process;
pub(super) mod loaded_filter;
pub(super) mod loader;
pub(super) mod options;
pub(super) mod reload;
pub(super) mod schema;
