//! The local cache: which responses are cached, the store they go to (crash-safe, one
//! writer, many readers), the tees the response pipeline writes through, and the queries the
//! local proxy answers from it.
//!
//! Keys follow YurtHub: `<component>/<resource>.<version>.<group|core>/<namespace>/<name>`.
//! The unit of replacement is a list set (a resource for a component, in a namespace, with
//! its selectors): a list replaces exactly its set, in one transaction.
//!
//! # Layout
//! A response goes tee → message → writer → store; readers go to the store directly.
//! - `facade`: [`Cache`], what the gateway holds: the policy, the store for readers, tees.
//! - `policy`: what is cached ([`CachePolicy`], [`CacheTarget`],
//!   [`ListQuery`](crate::request::ListQuery)).
//! - `tee`: [`ListTee`], [`WatchTee`], [`ObjectTee`], the stream's sinks, one per response.
//! - `message`: the one enum of what the writer is sent, and the way to it (a leaf).
//! - `writer`: the one writer: its thread, list ids, and what the tees draw on.
//! - `budget`: the in-flight budget of object bytes on their way to the writer.
//! - `pages`: paginated lists waiting for their next page.
//! - `usage`, `clock`, `gc`: components' uses, the running clock, garbage collection.
//! - `store`: the [`Store`] trait and [`WriteOp`]s; `redb_store`: the redb file;
//!   `guard`: [`GuardedStore`], which survives a damaged file.
//! - `key`: YurtHub keys and list sets; `selectors`, `field_selector`: which objects a
//!   set's selectors select.
//! - `read`: the local proxy's lists and watch backlogs; `read_page`: a page of a list, at a
//!   version the set's history proves; `inspect`: `/v1/cache` views.
//! - `local_layer`: what the node's own writes hold in the store, and its bound.
//! - `metrics`: the cache's counters.

mod budget;
mod clock;
mod facade;
mod field_selector;
mod gc;
mod guard;
#[cfg(test)]
mod hooked;
mod inspect;
mod key;
mod local_layer;
mod message;
mod metrics;
mod pages;
mod policy;
mod read;
mod read_page;
mod redb_store;
mod selectors;
mod store;
mod tee;
mod usage;
mod writer;

pub use clock::now;
pub use facade::{Cache, LocalChange};
pub use gc::collect_garbage;
pub use guard::GuardedStore;
pub use inspect::{SetSummary, object, summary};
pub use key::{ResourceKey, SetKey};
pub use local_layer::{LOCAL_LAYER_BYTES, LocalLayer, LocalWriteError};
pub use metrics::CacheMetrics;
pub use policy::{CachePolicy, CacheTarget};
pub use read::{Backlog, Listing, ReadError, Scope, list, watch_backlog};
pub use read_page::{Page, PageSpec, page};
pub use redb_store::RedbStore;
pub use selectors::{SelectorError, Selectors};
pub use store::{
    Damage, Fault, History, Objects, SetMeta, Store, StoreError, StoreWriter, VersionClock, WriteOp,
};
pub use tee::{ListTee, ObjectTee, Tee, WatchTee};
