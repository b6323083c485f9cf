//! The node-level multiplexer: one upstream list and watch per pool-scope resource
//! (`--pool-scope-resources`: Services and EndpointSlices by default, as YurtHub; the
//! `pool-scoped-metadata` of the pool's `leader-hub-<pool>` ConfigMap instead, when it
//! names them, as YurtHub v1.7) for the whole node, and every local client's list and watch of it answered from that shared
//! state — with its own selectors, resourceVersion semantics, bookmarks and filters, online
//! and offline alike.
//!
//! Kept once: the state in memory ([`state`]), fed by the one upstream watch ([`feed`]),
//! whose list and watch the gateway's cache persists (so a restart starts from them, and
//! offline answers read them). After a re-list, open watches get the differences as
//! events: nothing stale survives an offline reboot (YurtHub #2809), and no client has to
//! re-list. Each client's filters work on their own copy of each object (YurtHub #2481); when
//! what they looked up changes, a filtered watch is sent again the objects that read it
//! ([`refilter`]), rather than ended.

mod answer;
mod body;
mod feed;
mod list;
mod metrics;
mod object;
mod refilter;
mod registry;
pub(crate) mod resource;
mod state;
mod watch;

pub use answer::{Answer, READY_WITHIN};
pub use body::SharedBody;
pub use refilter::Refilter;
pub use registry::{Multiplexer, Sources, is_feed};
pub use resource::Resource;
