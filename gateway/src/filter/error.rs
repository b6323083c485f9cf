//! [`FilterError`]: why filters could not be loaded or the filter host could not start.

use std::path::PathBuf;

use thiserror::Error;

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
        "filter {name}: built against edgegate:filter@{built}, but this gateway runs edgegate:filter@{runs} (and loads components built against its earlier patch versions); rebuild it with the edgegate-filter-sdk of this gateway"
    )]
    Version {
        /// The filter.
        name: String,
        /// The world version it imports.
        built: String,
        /// The world version this gateway runs.
        runs: &'static str,
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
