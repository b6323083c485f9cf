//! Tools for filter authors: `edgegate filter check` loads a component as the gateway
//! would and prints its manifest and settings; `edgegate filter test` runs it on one object
//! or a list read from stdin and prints the decisions and the result; `edgegate filter
//! bench` measures what it costs per object ([`bench()`]).
//!
//! # Layout
//! - `harness`: the simulated request, loading a filter and opening its session.
//! - `check`: `edgegate filter check`. `test_run`: `edgegate filter test`.
//! - `bench`: `edgegate filter bench`. `input`: reading the objects or list given.

mod bench;
mod check;
mod harness;
mod input;
mod test_run;

pub use bench::bench;
pub use check::check;
pub use harness::TestRequest;
pub use test_run::test;
