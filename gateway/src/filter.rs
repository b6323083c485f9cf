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
mod feeds;
mod functions;
mod host;
mod instance;
mod loaded;
mod loader;
mod metrics;
mod options;
mod output;
mod reload;
mod schema;
mod seal;
mod session;
mod standins;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use thiserror::Error;

pub use author::{TestRequest, bench, check, test};
pub use chain::{Generation, NodeFacts};
pub use child::{check_config, compile_into_cache};
pub use edgegate_filter_sdk::LabelSelector;
pub use engine::PERF_MAP_ENV;
pub use feeds::LookupUse;
pub use instance::Failure;
pub use metrics::FilterMetrics;
pub use options::{Effective, Limits, OnError};
pub use output::check_replacement;
pub use reload::{Filters, HubComponents};
pub use session::Session;

/// Why filters could not be loaded or the filter host could not start. A load failure
/// names the filter and the step; the previous generation keeps serving.
#[derive(Debug, Error)]
pub enum FilterError {
    /// The wasmtime engine could not be built.
    #[error("cannot build the wasm engine: {0}")]
    Engine(String),
    /// The compiled-code store's directory could not be made.
    #[error("cannot use {path} for compiled filters")]
    CompiledCache {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The compiled-code store's directory may not be trusted with code the gateway maps.
    #[error("refusing {path} for compiled filters: {reason}")]
    UntrustedStore {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A file of the filter directory could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The directory could not be watched.
    #[error("cannot watch {path}: {message}")]
    Watch {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The gateway's filter config file is not valid.
    #[error("filter config {path}: {message}")]
    GatewayConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A filter's `NAME.toml` is not valid.
    #[error("filter {name}: bad NAME.toml: {message}")]
    Options {
        /// The filter.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A `.wasm` is not a valid component.
    #[error("filter {name}: cannot compile: {message}")]
    Compile {
        /// The filter.
        name: String,
        /// Why.
        message: String,
    },
    /// A component does not fit the `edgegate:filter` world.
    #[error("filter {name}: cannot link: {message}")]
    Link {
        /// The filter.
        name: String,
        /// Why.
        message: String,
    },
    /// A component was built against another version of the `edgegate:filter` world.
    #[error(
        "filter {name}: built against edgegate:filter@{built}, but this gateway runs edgegate:filter@{} (and loads components built against its earlier patch versions); rebuild it with the edgegate-filter-sdk of this gateway",
        bindings::WORLD_VERSION
    )]
    Version {
        /// The filter.
        name: String,
        /// The world version it imports.
        built: String,
    },
    /// A first instance could not be made or its manifest read.
    #[error("filter {name}: {message}")]
    Instantiate {
        /// The filter.
        name: String,
        /// Why.
        message: String,
    },
    /// The config does not match the manifest's schema.
    #[error("filter {name}: {message}")]
    Schema {
        /// The filter.
        name: String,
        /// Where the config breaks the schema.
        message: String,
    },
    /// The filter's `configure` refused its config.
    #[error("filter {name}: configure refused the config: {message}")]
    Configure {
        /// The filter.
        name: String,
        /// The filter's reason.
        message: String,
    },
    /// Bad input to a filter tool (`edgegate filter …`).
    #[error("{0}")]
    Input(String),
}

impl FilterError {
    /// The filter the error is about, if it is about one.
    pub fn filter(&self) -> Option<&str> {
        match self {
            FilterError::Options { name, .. }
            | FilterError::Compile { name, .. }
            | FilterError::Link { name, .. }
            | FilterError::Version { name, .. }
            | FilterError::Instantiate { name, .. }
            | FilterError::Schema { name, .. }
            | FilterError::Configure { name, .. } => Some(name),
            _ => None,
        }
    }
}

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

/// Where the filters come from and what they run with.
#[derive(Clone, Debug)]
pub struct FilterSettings {
    /// The watched filter directory; `None` serves an empty chain.
    pub dir: Option<PathBuf>,
    /// The gateway-level filter config file (also watched).
    pub config_file: Option<PathBuf>,
    /// Where compiled code is kept (outside the watched directory).
    pub compiled_cache_dir: PathBuf,
    /// The `edgegate` binary whose `filter compile` and `filter check-config` compile new
    /// filters and check their configs in a child process, so the memory that work leaves
    /// behind goes with it; `None` does both in this process.
    pub helper: Option<PathBuf>,
    /// Called on the loading thread after each load, succeeded or failed (see
    /// [`crate::config::Config::return_freed_memory`]).
    pub after_load: Option<fn()>,
    /// This node's name, given to filters.
    pub node_name: String,
    /// This node's pool, given to filters.
    pub node_pool: Option<String>,
    /// Limits of filters whose `NAME.toml` sets none.
    pub limits: Limits,
    /// How long the directory must be quiet before it is rescanned.
    pub debounce: Duration,
    /// Filters the command line turns off, over what the config file says (`*`: all);
    /// `-` and `_` in names are ignored, so YurtHub's names match.
    pub disabled: Vec<String>,
}

/// Collapses the bursts of events one copy, rename or ConfigMap swap makes (they come
/// within milliseconds), and leaves most of the one-second reload budget to compiling.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(100);

/// The compiled-code store's folder under `--disk-cache-path`; the underscore keeps it apart
/// from the per-component folders of the object cache.
pub const COMPILED_CACHE_DIR: &str = "_compiled-filters";
