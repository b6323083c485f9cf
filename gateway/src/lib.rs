//! edgegate: a node-local gateway for the Kubernetes API on edge nodes.
//!
//! Node components talk to edgegate instead of kube-apiserver; it forwards their requests
//! to a healthy apiserver and streams the answers back.
//!
//! # Layout
//! From the top tier down; a module imports only modules of lower tiers, and no two files
//! import each other (`tests/layout.rs` checks both). A request travels
//! request → server → upstream → stream → filter → tee → cache, or → local when offline.
//! - [`server`]: the app and its identity, the proxy and hub listeners, per-request
//!   wiring, the route table, the switch on the kind of response.
//! - [`config`]: what the flags say, checked; plain data.
//! - [`local`]: answers from the cache while no apiserver is reachable.
//! - `node`: the node-level services: the multiplexer, the pool's leaders, the
//!   `NodeAutonomy` condition, the informers filters look up, `yurt-hub-cfg` followed.
//! - [`tools`]: the `filter` and `cache` subcommands.
//! - `tls`: the HTTPS servers' TLS settings: their pair, and the client CAs they ask for.
//! - [`cache`]: what is cached, the facade, its one writer, the typed tees, the crash-safe
//!   store, offline reads.
//! - `upstream`: credentials, TLS clients, the balancer and the health checker.
//! - [`filter`]: the Wasm filter host: its runtime, loading and hot reload, the chain.
//! - [`stream`]: responses as streams of objects: one body driver over list and watch
//!   framings, single objects, the transform and tee traits.
//! - [`refusal`]: answers the gateway makes itself, and the one function that makes them
//!   `Status` responses, counted by fault.
//! - [`reply`]: response bodies and `Status` bodies.
//! - `registry`: filter images in OCI registries: pulled by digest, pushed, kept on disk.
//! - Leaves: [`cli`] (the command line, parsed with nothing of the gateway below it),
//!   [`request`] (the request context, parsed once: RequestInfo, component, list options),
//!   `hub_link` (the hub interface, a dummy network link with the address pods reach),
//!   `certificate` (the gateway's client and serving certificates: bootstrapped, renewed),
//!   `metrics` (the Prometheus registry), [`error`] (the boxed error, an error's causes on
//!   one line), `json` (JSON indented for reading), `whole_file` (files written whole:
//!   temporary, synced, renamed).
//!
//! # Surface
//! Modules are private unless something outside the crate needs them: the binary
//! ([`cli`], [`config`], [`tools`], [`error`]), the development node (`edgegate-dev`:
//! [`server`]), the criterion benches and the load harness ([`stream`], [`filter`],
//! [`cache`], [`request`], [`reply`]), the end-to-end tests (the store of [`cache`]) and
//! the fuzz targets ([`local`], [`refusal`], and `fuzzing` behind the `fuzzing` feature).
//! Those linked above are public; the others (`node`, `upstream`, …) are used only
//! inside the crate.

pub mod cache;
mod certificate;
pub mod cli;
pub mod config;
pub mod error;
pub mod filter;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod hub_link;
mod json;
pub mod local;
mod metrics;
mod node;
pub mod refusal;
mod registry;
pub mod reply;
pub mod request;
pub mod server;
pub mod stream;
mod tls;
pub mod tools;
mod upstream;
mod whole_file;
