//! The edgegate filter SDK: write a filter as one trait on a struct, export it with one macro.
//!
//! ```
//! use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb, export_filter};
//!
//! /// The config: the annotation to stamp (the filter is its own config).
//! #[derive(serde::Deserialize)]
//! struct Stamp {
//!     annotation: String,
//! }
//!
//! impl Filter for Stamp {
//!     type Config = Self;
//!     fn manifest() -> Manifest {
//!         Manifest::new("stamp", "0.1.0")
//!             .matches("", &["pods"], &[Verb::List, Verb::Watch])
//!             .components(&["kubelet"])
//!     }
//!     fn filter(&self, ctx: &Context, object: &mut Object) -> Decision {
//!         object.set_annotation(&self.annotation, &ctx.node_name);
//!         Decision::Keep
//!     }
//! }
//!
//! export_filter!(Stamp);
//! ```
//!
//! Built for `wasm32-wasip2` the crate is a component of the `edgegate:filter` world
//! (`wit/filter.wit`); built natively the same code runs under [`testing::Harness`], a fake
//! host, so filter logic is tested with plain `cargo test`.
//!
//! # Layout
//! - [`filter`]: the [`Filter`] trait a filter implements, and [`IntoFilter`], how its typed
//!   config builds it.
//! - [`types`]: the request context, the manifest, the decisions and the [`Resource`] a
//!   lookup names, as plain Rust types.
//! - [`object`]: [`Object`], a Kubernetes object parsed once, with typed accessors; it knows
//!   whether it was edited.
//! - [`host`]: what the gateway grants a filter: lookups, logging, counters.
//! - [`kube`]: Kubernetes and OpenYurt knowledge filters share: annotations, the hub
//!   address, endpoints by node, a Service's and a node pool's lookups.
//! - [`selector`]: Kubernetes label selectors, parsed and matched (the gateway uses it too).
//! - [`testing`]: the native test harness, its fake host and the [`testing::Output`] a test
//!   reads (not in wasm builds).
//! - `adapter`: runs a [`Filter`] behind the exports: config, parsing, decisions to outputs.
//! - `bindings`: the bindings generated from `wit/filter.wit` (wasm builds only).
//! - `guest`: the wasm side of the exports: the bindings' types converted, the functions
//!   `export_filter!` calls. [`host`] calls the imports (its `wasm` backend; natively its
//!   `fake`, which [`testing`] installs).
//! - `export_filter!`: exports a [`Filter`] as the component's implementation.
//!
//! What the gateway reads of objects itself (a few fields of bytes, what a replacement kept)
//! is in `edgegate-json-scan`, not here.

// The guest bindings name this crate by its public path, so that the `export_filter!` macro
// expanded in a filter crate and the bindings inside this crate resolve the same items.
extern crate self as edgegate_filter_sdk;

mod adapter;
#[cfg(target_family = "wasm")]
#[doc(hidden)]
pub mod bindings;
mod export;
pub mod filter;
#[cfg(target_family = "wasm")]
mod guest;
pub mod host;
pub mod kube;
pub mod object;
pub mod selector;
#[cfg(not(target_family = "wasm"))]
pub mod testing;
pub mod types;

pub use filter::{Filter, IntoFilter};
pub use object::{Object, ObjectError};
pub use selector::{LabelSelector, SelectorError};
pub use types::{Context, Decision, Level, Manifest, Resource, ResourceMatch, Verb};

/// Re-exported for filters: configs and objects are `serde_json` values.
pub use serde_json;

/// Items the `export_filter!` macro expands to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::adapter::Slot;
    #[cfg(target_family = "wasm")]
    pub use crate::bindings;
    #[cfg(target_family = "wasm")]
    pub use crate::guest::{Guest, begin, configure, filter, filter_batch, manifest, wit_bindgen};
}
