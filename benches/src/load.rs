//! The side-by-side load harness behind `benches/load/run`: the same workloads against the
//! upstream directly, edgegate without filters, edgegate with the three seed filters, and a
//! Go `httputil.ReverseProxy` that tees each body to disk (the core of YurtHub), on a fast
//! static upstream and on kube-apiserver, in one run.
//!
//! # Layout
//! - `workload`: the wrk workloads and what wrk reports.
//! - `upstream`: the static upstream (canned GET, LIST and watch answers).
//! - `apiserver`: etcd and kube-apiserver from the test harness, with the same objects.
//! - `targets`: the proxies under test, pinned to their CPU.
//! - `measure`: a workload's figures with the proxy's CPU time and peak RSS; the watch client.
//! - `watch`: the watch fan-out client (event delivery delay).
//! - `probes`: idle RSS, LIST memory growth, hot reload time.
//! - `run`: a whole run. `report`: the Markdown report.
//! - `node`: the gateway's CPU and memory while it serves a real node (`edgegate-load node`).
//! - `traffic`: the cloud–edge traffic of a node workload (`edgegate-load traffic`), with
//!   `kube` (a client-go-like client), `reflector` (the simulated agents) and `churn` (the
//!   cloud's objects and their updates); `soak`, the same workload for an hour with the
//!   gateway's use sampled, plotted and judged for upward trends (`edgegate-load soak`).
//! - `thin_link`: that node workload across a 50 kbit/s link, through the gateway and
//!   direct: time to Ready and to kube-proxy's rules, bytes, re-lists, a cut
//!   (`edgegate-load thin-link`).
//! - `pool`: the cloud's bytes for a node pool with and without a leader hub
//!   (`edgegate-load pool`).
//! - `gateway`: one gateway with the caller's flags in front of a running kube-apiserver,
//!   the apiserver workloads through it (`edgegate-load gateway`), for A/B runs in turns.

pub mod apiserver;
pub mod churn;
pub mod gateway;
pub mod kube;
pub mod measure;
pub mod node;
pub mod pool;
pub mod probes;
pub mod reflector;
pub mod report;
pub mod run;
pub mod soak;
pub mod targets;
pub mod thin_link;
pub mod traffic;
pub mod upstream;
pub mod watch;
pub mod workload;
