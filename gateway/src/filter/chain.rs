//! The chain: a generation of loaded filters in order, and the filtering of one response
//! through those that apply to it.
//!
//! # Layout
//! - `generation`: a [`Generation`](generation::Generation) of the chain, its order and
//!   which filters apply to a request; the node facts filters see.
//! - `session`: a [`Session`](session::Session), the filtering of one response.
//! - `lookup_use`: which change feeds a filter's lookups read, so only watches whose filters
//!   read a changed feed are re-listed.
//! - `replacement`: what a filter's replacement must be before it is sent on.

pub(super) mod generation;
pub(super) mod lookup_use;
pub(super) mod replacement;
pub(super) mod session;
