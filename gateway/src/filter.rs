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
//! - `error`: [`FilterError`], why filters could not be loaded or the host could not start.
//! - `lookup`: the [`Lookup`] trait behind the `get` and `list` imports.
//! - `settings`: [`FilterSettings`], the per-call [`Limits`] and the [`OnError`] policy.
//! - `metrics`: per-filter metrics.
//! - `runtime`: the wasmtime engine, epoch ticker, host imports, instances, compiled code.
//! - `loading`: the directory, its watch and reload, options, schema, the helper process.
//! - `chain`: a [`Generation`], a [`Session`], lookup use, the replacement check.
//! - `author`: `edgegate filter check`, `test` and `bench`.

mod author;
mod chain;
mod error;
mod loading;
mod lookup;
mod metrics;
mod runtime;
mod settings;
#[cfg(test)]
mod tests;

pub use author::{TestRequest, bench, check, test};
pub use chain::generation::{Generation, NodeFacts};
pub use chain::lookup_use::{LookupUse, Touched};
pub use chain::replacement::check_replacement;
pub use chain::session::Session;
pub use edgegate_filter_sdk::LabelSelector;
pub use error::FilterError;
pub use loading::options::RunSettings;
pub use loading::reload::{Filters, HubComponents};
pub use loading::schema::check_config;
pub use lookup::{Lookup, LookupChange, NoLookup};
pub use metrics::FilterMetrics;
pub use runtime::engine::{PERF_MAP_ENV, compile_into_cache};
pub use runtime::instance::Failure;
pub use settings::{COMPILED_CACHE_DIR, DEFAULT_DEBOUNCE, FilterSettings, Limits, OnError};
