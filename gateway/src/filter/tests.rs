//! Tests of the filter host against the real filter components, built by
//! `tests/build-filters` (on demand when `target/filters/` lacks them).

mod author;
mod chain;
mod code_store;
mod declared;
mod grants;
mod helper_process;
mod limits;
mod reload;
mod sealed;
mod support;
