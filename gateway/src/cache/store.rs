//! The store behind the cache: the trait every store implements (the embedded redb store
//! now, a shared etcd store for node pools later), and the writes the writer batches.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::key::SetKey;
use crate::stream::{Meta, compare_versions};

/// A store operation failed.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The database could not be opened.
    #[error("cannot open the cache at {path}")]
    Open {
        /// The database file.
        path: std::path::PathBuf,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A read or write failed in the storage engine.
    #[error("cache storage failed")]
    Engine(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Stored data could not be read back: metadata that does not decode, or an object
    /// whose bytes do not match their digest (a page changed under the engine).
    #[error("corrupt cache data under {0}")]
    Corrupt(String),
    /// The storage engine panicked (a damaged file can make it); the panic was contained.
    #[error("the cache storage panicked: {0}")]
    Panicked(String),
    /// The store is closed while its disk fails (see [`Fault`]), until it opens again.
    #[error("the cache disk is failing; the cache is closed until it works again")]
    Unavailable,
}

impl StoreError {
    /// Whether the store itself is damaged, so that only a fresh one will do: its engine
    /// found a corrupt page or panicked, a page lies past the file's end (the file was
    /// truncated under it), or data it wrote does not read back. Another I/O error (a full
    /// disk) is not damage: the same store may work again.
    pub fn is_damage(&self) -> bool {
        match self {
            StoreError::Panicked(_) | StoreError::Corrupt(_) => true,
            StoreError::Unavailable => false,
            StoreError::Open { source, .. } | StoreError::Engine(source) => {
                match source.downcast_ref::<redb::Error>() {
                    Some(redb::Error::Corrupted(_) | redb::Error::RepairAborted) => true,
                    Some(redb::Error::Io(io)) => is_truncation(io),
                    _ => false,
                }
            }
        }
    }

    /// The kind of disk fault this is — `full`, `read_only` or `io` — or `None` when it is
    /// none: the file or its disk failed to read or write (the store is fine, and may work
    /// again once the disk does), or the store is closed because of such a failure.
    pub fn disk_fault(&self) -> Option<&'static str> {
        let source = match self {
            StoreError::Unavailable => return Some("io"),
            StoreError::Panicked(_) | StoreError::Corrupt(_) => return None,
            StoreError::Open { source, .. } | StoreError::Engine(source) => source,
        };
        let io = match source.downcast_ref::<redb::Error>() {
            Some(redb::Error::Io(io)) if is_truncation(io) => return None,
            Some(redb::Error::Io(io)) => io,
            // redb fails every write after an I/O error until it is opened again.
            Some(redb::Error::PreviousIo) => return Some("io"),
            Some(_) => return None,
            None => source.downcast_ref::<std::io::Error>()?,
        };
        Some(match io.kind() {
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => "full",
            std::io::ErrorKind::ReadOnlyFilesystem => "read_only",
            _ => "io",
        })
    }
}

/// Whether `io` is a read past the file's end: redb reads only pages its file held, so the
/// file was cut short under it (truncated, or replaced by a shorter one), which no disk
/// coming back undoes.
fn is_truncation(io: &std::io::Error) -> bool {
    io.kind() == std::io::ErrorKind::UnexpectedEof
}

/// What is known of a committed list set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetMeta {
    /// The resourceVersion the set is synced to: its list's, advanced by its watch events.
    pub resource_version: String,
    /// The list's `kind`, e.g. `ServiceList`, to answer offline lists with.
    pub list_kind: String,
    /// The list's `apiVersion`.
    pub api_version: String,
    /// When the set's list was committed (unix seconds).
    pub committed_at: u64,
    /// How many items that list held.
    pub items: u64,
    /// A watch event of the set was lost (the writer had no room for it): the set holds
    /// what it held at `resource_version`, its last consistent version, and is not synced
    /// further until a list of it commits again.
    #[serde(default)]
    pub stale: bool,
    /// The resourceVersion from which the set's history (who entered it, who left it) is
    /// complete: its first list's, raised when old tombstones are pruned. An offline watch
    /// from an older version cannot be answered exactly. Empty in stores written before
    /// histories were kept: complete from `resource_version` on.
    #[serde(default)]
    pub history_from: String,
    /// Tombstones the set keeps in its history, so they are pruned without counting them.
    #[serde(default)]
    pub tombstones: u64,
    /// The lowest resourceVersion the node's own writes (the local layer's, of the set's
    /// component) took in the set since its list committed; empty when none. The cloud has
    /// not seen them, so once it is back a watch of the set that resumes (from any version)
    /// is answered `410 Expired`: the writer lists again from the cloud, finds its writes
    /// missing and makes them again. The next commit of a list clears it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub own_writes_from: String,
}

/// What a set's history says of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum History {
    /// The object entered the set at this resourceVersion (an ADDED event of its watch).
    Entered(String),
    /// The object left the set (a DELETED event of its watch, or a list no longer holding
    /// it): its last state, at the resourceVersion at which it left.
    Left(Bytes),
}

impl History {
    /// Whether this entry hides `object` from its set: a departure at the object's version
    /// or later (an unreadable version hides it too).
    pub fn hides(&self, object: &[u8]) -> bool {
        let History::Left(last) = self else {
            return false;
        };
        let version = |bytes: &[u8]| Meta::parse(bytes).map(|m| m.resource_version.into_owned());
        match (version(last), version(object)) {
            (Ok(left), Ok(stored)) => compare_versions(&left, &stored).is_none_or(|o| o.is_ge()),
            _ => true,
        }
    }
}

/// One write, as the writer hands them to the store in batches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOp {
    /// An item of list `list`, held apart until the list commits.
    Stage {
        /// The list being received.
        list: u64,
        /// The object's key.
        key: String,
        /// The object.
        object: Bytes,
    },
    /// List `list` is complete: its staged items replace `set`.
    Commit {
        /// The list.
        list: u64,
        /// The set it replaces.
        set: SetKey,
        /// The set's new metadata.
        meta: SetMeta,
    },
    /// List `list` broke off: its staged items are discarded.
    Abort {
        /// The list.
        list: u64,
    },
    /// An object, stored unless the stored one has a newer resourceVersion.
    Upsert {
        /// The object's key.
        key: String,
        /// The object.
        object: Bytes,
        /// The object's resourceVersion, read once by the writer with its key.
        resource_version: String,
    },
    /// An object a single-object response brought, of which only the metadata was read
    /// ([`Meta::parse_checked`]): an [`WriteOp::Upsert`] once the store finds it would
    /// write it and it reads whole ([`Meta::reads_whole`]); dropped, and counted in
    /// [`Applied::unreadable`], if it does not. Most GETs bring back what the store holds,
    /// found by its digest without reading the object.
    Fetched {
        /// The object's key.
        key: String,
        /// The object.
        object: Bytes,
        /// The object's resourceVersion, as its metadata was read.
        resource_version: String,
    },
    /// An object left `set` (a DELETED event of its watch): it leaves the set, and the
    /// store, unless another set of the component still holds it; nothing happens when the
    /// stored object is newer than `resource_version`.
    Remove {
        /// The set whose watch said so.
        set: SetKey,
        /// The object's key.
        key: String,
        /// The event's object: the last state, at the version at which it left.
        object: Bytes,
        /// The version at which it left.
        resource_version: String,
    },
    /// An object entered `set` at `resource_version` (an ADDED event of its watch); ignored
    /// for sets that were never listed.
    Entered {
        /// The set.
        set: SetKey,
        /// The object's key.
        key: String,
        /// Its resourceVersion.
        resource_version: String,
    },
    /// A watch event of `set` was lost: the set is stale until its next list commits.
    Lost {
        /// The set.
        set: SetKey,
    },
    /// The node's own write (the local layer's) put an object at `resource_version` in
    /// `set`: see [`SetMeta::own_writes_from`]. Ignored for sets that were never listed.
    OwnWrite {
        /// The set.
        set: SetKey,
        /// The write's resourceVersion.
        resource_version: String,
    },
    /// The object just stored under `key` is the node's own write (the local layer's): it
    /// counts in [`Store::local_layer`] until the cloud replaces it or it leaves the store.
    LocalMark {
        /// The object's key.
        key: String,
    },
    /// A set is synced to a resourceVersion (a bookmark or an event of its watch); ignored
    /// for sets that were never listed.
    Synced {
        /// The set.
        set: SetKey,
        /// Its resourceVersion.
        resource_version: String,
    },
    /// A component was served at `at`, in seconds of the gateway's running time (see
    /// [`Store::running_secs`]); drives garbage collection.
    Touch {
        /// The component.
        component: String,
        /// When.
        at: u64,
    },
    /// The gateway has run for `secs` seconds in all, over every start of this store.
    Running {
        /// The seconds.
        secs: u64,
    },
    /// A clock of resourceVersions reached `version` (kept when above the one stored).
    VersionClock {
        /// Which clock.
        clock: VersionClock,
        /// The resourceVersion.
        version: u64,
    },
}

/// The resourceVersion clocks a store keeps for the node's own writes (see `local::layer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionClock {
    /// The highest resourceVersion the cloud was seen at: no local write passes it.
    Cloud,
    /// The highest resourceVersion given to a local write: the next one is newer.
    Local,
}

/// Stored objects under a prefix, in key order.
pub type Objects = Box<dyn Iterator<Item = Result<(String, Bytes), StoreError>> + Send>;

/// A cache store as its readers have it: reads may run on any thread at any time. Writing
/// takes the other half, [`StoreWriter`], which only the cache's one writer is handed.
pub trait Store: Send + Sync {
    /// One object by key.
    fn get(&self, key: &str) -> Result<Option<Bytes>, StoreError>;
    /// The objects whose keys start with `prefix`, in key order.
    fn scan(&self, prefix: &str) -> Result<Objects, StoreError>;
    /// The committed sets whose encoded keys start with `prefix`.
    fn sets(&self, prefix: &str) -> Result<Vec<(SetKey, SetMeta)>, StoreError>;
    /// Every component with its last use (seconds of running time).
    fn components(&self) -> Result<Vec<(String, u64)>, StoreError>;
    /// How long the gateway has run over this store, as last written: the clock component
    /// uses are recorded in, so time the node was off never counts towards collecting one.
    fn running_secs(&self) -> Result<u64, StoreError>;
    /// The resourceVersion `clock` was at, as last written ([`WriteOp::VersionClock`]); 0
    /// when it never was.
    fn version_clock(&self, clock: VersionClock) -> Result<u64, StoreError>;
    /// The history of `set`: the keys known to have entered it and those that left it.
    fn history(&self, set: &SetKey) -> Result<Vec<(String, History)>, StoreError>;
    /// The objects the node's own writes made that the store still holds as written
    /// ([`WriteOp::LocalMark`]): each key with its object's length.
    fn local_layer(&self) -> Result<Vec<(String, u64)>, StoreError>;
    /// The damage this store recovered from since the gateway started, if any.
    fn damage(&self) -> Option<Damage> {
        None
    }
    /// The disk fault the store is in now, if any.
    fn fault(&self) -> Option<Fault> {
        None
    }
}

/// A cache store's write half: the cache's one writer (`cache::writer`) alone holds it, and
/// applies what the tees, the local layer and garbage collection send it.
pub trait StoreWriter: Store {
    /// Applies a batch of writes in one transaction; `durable` makes it (and every batch
    /// before it) survive a crash before this returns. A batch that would change nothing
    /// and need not be durable may be left unwritten.
    fn apply(&self, ops: &[WriteOp], durable: bool) -> Result<Applied, StoreError>;
    /// Removes everything cached for `component` in one transaction; returns how many
    /// objects went.
    fn remove_component(&self, component: &str) -> Result<u64, StoreError>;
}

impl WriteOp {
    /// The key, object and resourceVersion of an [`WriteOp::Upsert`] or a
    /// [`WriteOp::Fetched`], which the store keeps or writes alike.
    pub fn upserted(&self) -> Option<(&str, &Bytes, &str)> {
        match self {
            WriteOp::Upsert {
                key,
                object,
                resource_version,
            }
            | WriteOp::Fetched {
                key,
                object,
                resource_version,
            } => Some((key, object, resource_version)),
            _ => None,
        }
    }
}

/// What [`StoreWriter::apply`] did with a batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Whether it wrote: false for a batch left unwritten because it changed nothing.
    pub wrote: bool,
    /// The [`WriteOp::Fetched`] objects dropped because they did not read whole.
    pub unreadable: u64,
}

/// A disk fault the store is in (full, read-only, failing), as `/v1/readyz` reports it:
/// the store is closed and opened again (at most once a second) until the disk works.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// `full`, `read_only` or `io`, as counted in `edgegate_cache_disk_faults_total`.
    pub kind: &'static str,
    /// When it began (unix seconds).
    pub since: u64,
    /// The first error of it.
    pub reason: String,
    /// How many disk faults there were since start, this one included.
    pub episodes: u64,
}

/// A damaged store replaced by a fresh one, as `/v1/readyz` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// How many times a store was replaced since start.
    pub resets: u64,
    /// When the last one was (unix seconds).
    pub at: u64,
    /// What was wrong with it.
    pub reason: String,
    /// Where the damaged file was moved, when it could be.
    pub aside: Option<std::path::PathBuf>,
    /// Whether no file could be created either, so the cache lives in memory until exit.
    pub in_memory: bool,
}
