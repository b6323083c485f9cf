//! Tests of the filter host against the real filter components, built by
//! `tests/build-filters` (on demand when `target/filters/` lacks them).

mod author;
mod chain;
mod child;
mod compiled;
mod grants;
mod limits;
mod reload;
mod sealed;
mod support;
