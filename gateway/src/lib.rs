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
//! - [`filter`]: the Wasm filter host: loading, hot reload, the chain, per-call limits.
//! - [`cache`]: what is cached, the crash-safe store, its one writer, offline queries.
//! - [`stream`]: responses as streams of objects: framing, the transform hook, the tee.
//! - [`request`]: what a request is (RequestInfo, component); pure, no I/O.
//! - [`metrics`]: the Prometheus registry; [`reply`]: response bodies and `Status` answers.
//! - [`certificate`]: the gateway's client certificate: bootstrapped with a token, renewed.
//! - [`config`] and [`cli`]: the command line and the checked configuration; [`tools`]: the
//!   `filter` and `cache` subcommands.

pub mod autonomy;
pub mod cache;
pub mod certificate;
pub mod cli;
pub mod config;
pub mod filter;
pub mod hubcfg;
pub mod informer;
pub mod interface;
pub mod local;
pub mod metrics;
pub mod reply;
pub mod request;
pub mod server;
pub mod stream;
pub mod tools;
pub mod upstream;

pub use config::Config;

/// A boxed error from a body, a connection or a pipeline stage.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// JSON text indented for reading, its fields in their written order (not sorted, as a
/// parse into a map would sort them); text that is not one JSON value is refused.
pub fn indent_json(json: &[u8]) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(json.len() * 2);
    let mut reader = serde_json::Deserializer::from_slice(json);
    serde_transcode::transcode(&mut reader, &mut serde_json::Serializer::pretty(&mut out))?;
    reader.end()?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}

/// An error and its causes on one line, `outer: cause: root cause`, for logs and `Status`
/// messages.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Wrappers that repeat their cause verbatim add nothing.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
