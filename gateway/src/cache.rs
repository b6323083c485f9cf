//! The local cache: which responses are cached, the store they go to (crash-safe, one
//! writer, many readers), the tee the response pipeline writes through, and the queries the
//! local proxy answers from it.
//!
//! Keys follow YurtHub: `<component>/<resource>.<version>.<group|core>/<namespace>/<name>`.
//! The unit of replacement is a list set (a resource for a component, in a namespace, with
//! its selectors): a list replaces exactly its set, in one transaction.

mod clock;
mod gc;
mod guard;
mod inspect;
mod key;
mod metrics;
mod policy;
mod read;
mod redb_store;
mod room;
mod selection;
mod selector;
mod store;
mod tee;
mod usage;
mod writer;

pub use clock::now;
pub use gc::collect_garbage;
pub use guard::GuardedStore;
pub use inspect::{SetSummary, object, summary};
pub use key::{ResourceKey, SetKey};
pub use metrics::CacheMetrics;
pub use policy::{CachePolicy, CacheTarget, DEFAULT_CACHE_AGENTS, ListQuery};
pub use read::{Backlog, Listing, ReadError, Scope, list, watch_backlog};
pub use redb_store::RedbStore;
pub use selection::{Selection, SelectionError};
pub use store::{Damage, History, Objects, SetMeta, Store, StoreError, WriteOp};
pub use tee::CacheTee;
pub use writer::Cache;
