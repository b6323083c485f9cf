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
//! - `runtime`: the wasmtime engine, epoch ticker, host imports, instances, compiled code
//!   and the helper process that compiles it, what each call's lookups read, the check of
//!   a filter's replacement.
//! - `loading`: the directory and its watch, options, schema, a filter loaded.
//! - `chain`: a [`Generation`], a [`Session`], the reload that swaps generations, what a
//!   generation's filters are described as.
//! - `author`: `edgegate filter check`, `test` and `bench`.
//!
//! Each room imports only the rooms above it in this list (`runtime` the leaves, `loading`
//! `runtime`, `chain` both, `author` all three).

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
pub use chain::declared::{DeclaredFilter, DeclaredState, DeclaredStatus};
pub use chain::generation::{Generation, NodeFacts};
pub use chain::reload::{Filters, HubComponents};
pub use chain::resends::Resends;
pub use chain::session::Session;
pub use edgegate_filter_sdk::LabelSelector;
pub use error::FilterError;
pub use loading::options::RunSettings;
pub use loading::schema::check_config;
pub use lookup::{Lookup, LookupChange, NoLookup};
pub use metrics::FilterMetrics;
pub use runtime::engine::{ON_DEMAND_ENV, PERF_MAP_ENV, compile_into_cache};
pub use runtime::instance::Failure;
pub use runtime::lookup_use::{LookupUse, Touched};
pub use runtime::replacement::check_replacement;
pub use settings::{COMPILED_CACHE_DIR, DEFAULT_DEBOUNCE, FilterSettings, Limits, OnError};
