//! The WebAssembly filter host: loads the filters of `--filter-dir`, keeps them as an
//! ordered chain that is swapped atomically when the directory changes, and filters each
//! response object by object through pooled, sandboxed instances under per-call limits.
//!
//! ```text
//! dir ──notify──▶ quiet spell ──▶ rescan + diff by hash ──▶ load (off the hot path) ──▶ swap
//!                                                             │ failure: keep previous, count
//! request ──▶ Generation::session(info, component) ──▶ Session: Transform, per object:
//!             filter₁ → filter₂ → … (keep | drop | replace; failure → the filter's policy)
//! ```
//!
//! # Layout
//! - [`bindings`](self::bindings): the host bindings of the WIT world (generated).
//! - `engine`: the one wasmtime engine, its linker and the epoch ticker (deadlines).
//!   `standins`: stand-ins that trap, for the imports the linker does not provide.
//! - `compiled`: the compiled-code store, files of machine code the gateway maps.
//!   `functions`: the functions compiled for it, which a new component's compile takes.
//! - `host`: a store's state; the host imports (lookups, log, count) and the WASI subset.
//! - `instance`: one instance and calls into it under its limits; why a call failed.
//! - `loaded`: a loaded filter and its pool of instances.
//! - `loader`: compile, link, manifest, settings, schema check, configure.
//! - `chain`: a [`Generation`] of the chain, its order and which filters apply.
//! - `session`: a [`Session`], the filtering of one response ([`crate::stream::Transform`]).
//! - `feeds`: which change feeds a filter's lookups read ([`LookupUse`]), so only watches
//!   whose filters read a changed feed are re-listed.
//! - `options`: `NAME.toml` and the gateway filter config; the settings a filter runs with.
//! - `schema`: config validation against the manifest's JSON Schema.
//! - `dir`: reading and hashing the directory. `dir_watch`: watching it. `reload`: rescanning
//!   it, swapping generations.
//! - `describe`: the live chain as JSON. `metrics`: per-filter metrics.
//! - `author`: `edgegate filter check`, `test` and `bench`.

mod author;
mod bindings;
mod chain;
mod child;
mod compiled;
mod describe;
mod dir;
mod dir_watch;
mod engine;
mod error;
mod feeds;
mod functions;
mod host;
mod instance;
mod loaded;
mod loader;
mod lookup;
mod metrics;
mod options;
mod output;
mod reload;
mod schema;
mod seal;
mod session;
mod settings;
mod standins;
#[cfg(test)]
mod tests;

pub use author::{TestRequest, bench, check, test};
pub use chain::{Generation, NodeFacts};
pub use edgegate_filter_sdk::LabelSelector;
pub use engine::{PERF_MAP_ENV, compile_into_cache};
pub use error::FilterError;
pub use feeds::LookupUse;
pub use instance::Failure;
pub use lookup::{Lookup, NoLookup};
pub use metrics::FilterMetrics;
pub use options::Effective;
pub use output::check_replacement;
pub use reload::{Filters, HubComponents};
pub use schema::check_config;
pub use session::Session;
pub use settings::{COMPILED_CACHE_DIR, DEFAULT_DEBOUNCE, FilterSettings, Limits, OnError};
