//! The chain: a generation of loaded filters in order, and the filtering of one response
//! through those that apply to it.
//!
//! # Layout
//! - `generation`: a [`Generation`](generation::Generation) of the chain, its order and
//!   which filters apply to a request; the node facts filters see.
//! - `session`: a [`Session`](session::Session), the filtering of one response.
//! - `reload`: [`Filters`](reload::Filters), rescanning the directory and swapping generations.
//! - `resends`: [`Resends`](resends::Resends), the objects a watch sends again to be
//!   filtered anew, marked for its filtering.
//! - `declared`: the filters the cluster declares, handed to the host, and what became of each.
//! - `describe`: the live chain as JSON.

pub(super) mod declared;
pub(super) mod describe;
pub(super) mod generation;
pub(super) mod reload;
pub(super) mod resends;
pub(super) mod session;
