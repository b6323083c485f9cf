//! edgegate: a node-local gateway for the Kubernetes API on edge nodes.
//!
//! Node components talk to edgegate instead of kube-apiserver; it forwards their requests
//! to a healthy apiserver and streams the answers back.
//!
//! # Layout
//! From the top tier down; a module imports only modules of its own tier or below, and no
//! two files import each other (`tests/layout.rs` checks both). A request travels
//! request → server → upstream → stream → filter → tee → cache, or → local when offline.
//! - [`tools`]: the `filter` and `cache` subcommands.
//! - [`server`]: the proxy and hub listeners, per-request wiring, the switch on the kind of
//!   response.
//! - [`config`]: the checked configuration, made from the command line.
//! - [`local`]: answers from the cache while no apiserver is reachable.
//! - `upstream`: credentials, TLS clients, the balancer and the health checker.
//! - [`filter`]: the Wasm filter host: its runtime, loading and hot reload, the chain.
//! - `multiplexer`: one upstream list and watch per pool-scope resource for the whole node,
//!   every local client's list and watch answered from that shared state.
//! - `pool`: the pool's leader hubs, as yurt-manager names them: a follower's feeds from a
//!   leader, the cloud while none answers.
//! - `autonomy`: the node's `NodeAutonomy` condition, kept through the gateway itself.
//! - `informer`: the objects filters look up, kept by the gateway's own informers.
//! - `hub_link`: the hub interface, a dummy network link with the address pods reach.
//! - `certificate`: the gateway's client and serving certificates: bootstrapped, renewed.
//! - `hubcfg`: YurtHub's `yurt-hub-cfg` ConfigMap, followed.
//! - `tls`: the HTTPS servers' TLS settings: their pair, and the client CAs they ask for.
//! - [`cache`]: what is cached, the facade, its one writer, the typed tees, the crash-safe
//!   store, offline reads.
//! - [`stream`]: responses as streams of objects: one body driver over list and watch
//!   framings, single objects, the transform and tee traits.
//! - [`request`]: the request context, parsed once: RequestInfo, component, list options.
//! - [`refusal`]: answers the gateway makes itself, and the one function that makes them
//!   `Status` responses, counted by fault.
//! - [`reply`]: response bodies and `Status` bodies.
//! - Leaves: [`cli`] (the command line, parsed with nothing of the gateway below it),
//!   `metrics` (the Prometheus registry), [`error`] (the boxed error, an error's causes on
//!   one line), `json` (JSON indented for reading).
//!
//! # Surface
//! Modules are private unless something outside the crate needs them: the binary
//! ([`cli`], [`config`], [`tools`], [`error`]), the development node (`edgegate-dev`:
//! [`server`]), the criterion benches and the load harness ([`stream`], [`filter`],
//! [`cache`], [`request`], [`reply`]), the end-to-end tests (the store of [`cache`]) and
//! the fuzz targets ([`local`], [`refusal`], and `fuzzing` behind the `fuzzing` feature).
//! Those linked above are public; the others (`multiplexer`, `upstream`, …) are used only
//! inside the crate.

mod autonomy;
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
mod hubcfg;
mod informer;
mod json;
pub mod local;
mod metrics;
mod multiplexer;
mod pool;
pub mod refusal;
pub mod reply;
pub mod request;
pub mod server;
pub mod stream;
mod tls;
pub mod tools;
mod upstream;
