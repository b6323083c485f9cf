//! edgegate's benchmarks: what the criterion benches (`benches/*.rs`) and the side-by-side
//! load harness (`benches/load/run`) share.
//!
//! # Layout
//! - [`fixtures`]: realistic objects (EndpointSlices and Services of 2 KB and 20 KB), list
//!   and watch bodies.
//! - [`seeds`]: the three seed filters, natively through the SDK harness and as wasm through
//!   the gateway's filter host, with the objects and paths they are compared on.
//! - [`drive`]: running the stream pipeline to its end on an in-memory body.
//! - [`proc`]: a process's CPU time and memory from `/proc`.
//! - [`load`]: the side-by-side load harness (`edgegate-load`, run by `benches/load/run`).
// The load harness is synchronous by design: it drives processes and wrk, not a runtime.
#![allow(clippy::disallowed_methods)]

pub mod drive;
pub mod fixtures;
pub mod load;
pub mod proc;
pub mod seeds;
