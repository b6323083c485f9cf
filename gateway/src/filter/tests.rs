//! Tests of the filter host against the real filter components, built by
//! `tests/build-filters` (on demand when `target/filters/` lacks them).

mod author;
mod chain;
mod limits;
mod precompile;
mod reload;
mod support;
