//! edgegate: a node-local gateway for the Kubernetes API on edge nodes.
//!
//! Node components talk to edgegate instead of kube-apiserver; it forwards their requests
//! to a healthy apiserver and streams the answers back.
//!
//! # Layout
//! A request travels top to bottom; each module imports only those below it.
//! - [`server`]: the proxy and hub listeners, per-request wiring, the one error → `Status` mapping.
//! - [`local`]: answers from the cache while no apiserver is reachable.
//! - [`autonomy`]: the node's `NodeAutonomy` condition, kept through the gateway itself.
//! - [`informer`]: the objects filters look up, kept by the gateway's own informers.
//! - [`upstream`]: credentials, TLS clients, the balancer and the health checker.
//! - [`interface`]: the hub interface (a dummy link with the address pods reach).
//! - [`tls`]: the HTTPS proxy's TLS settings: its pair, and the client CAs it asks for.
//! - [`filter`]: the Wasm filter host: loading, hot reload, the chain, per-call limits.
//! - [`cache`]: what is cached, the crash-safe store, its one writer, offline queries.
//! - [`stream`]: responses as streams of objects: framing, the transform hook, the tee.
//! - [`request`]: what a request is (RequestInfo, component); pure, no I/O.
//! - [`refusal`]: answers the gateway makes itself, and the one function that makes them
//!   `Status` responses, counted by fault.
//! - [`reply`]: response bodies and `Status` bodies.
//! - [`metrics`]: the Prometheus registry; [`error`]: the boxed error and an error's causes
//!   on one line; [`json`]: JSON indented for reading.
//! - [`certificate`]: the gateway's client certificate: bootstrapped with a token, renewed.
//! - [`config`] and [`cli`]: the command line and the checked configuration; [`tools`]: the
//!   `filter` and `cache` subcommands.

pub mod autonomy;
pub mod cache;
pub mod certificate;
pub mod cli;
pub mod config;
pub mod error;
pub mod filter;
pub mod hubcfg;
pub mod informer;
pub mod interface;
pub mod json;
pub mod local;
pub mod metrics;
pub mod refusal;
pub mod reply;
pub mod request;
pub mod server;
pub mod stream;
pub mod tls;
pub mod tools;
pub mod upstream;
