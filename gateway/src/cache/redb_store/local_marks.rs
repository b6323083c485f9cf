//! The local layer's marks: which stored objects the node's own writes made. A mark keeps
//! the digest of the object the write stored. While its key still holds that digest, the
//! object is the node's; once the cloud replaced it, or it left the store, the mark is stale
//! and is dropped at the next mark.

use redb::{ReadableTable, Table, TableDefinition};

use super::tables::{Digest, engine, prefix_end};
use crate::cache::store::StoreError;

/// Marks by object key: the digest of the object the node's own write stored there.
pub(super) const LOCAL: TableDefinition<&str, Digest> = TableDefinition::new("local");

/// Marks the object stored under `key` (by this transaction) as the node's own.
pub(super) fn mark(
    local: &mut Table<&str, Digest>,
    digests: &impl ReadableTable<&'static str, Digest>,
    key: &str,
) -> Result<(), StoreError> {
    if let Some(digest) = digests.get(key).map_err(engine)? {
        local.insert(key, digest.value()).map_err(engine)?;
    }
    Ok(())
}

/// Drops the marks whose objects were replaced or removed: the marks stay as many as the
/// node's own objects, however often the cloud replaces them.
pub(super) fn prune(
    local: &mut Table<&str, Digest>,
    digests: &impl ReadableTable<&'static str, Digest>,
) -> Result<(), StoreError> {
    let stale: Vec<String> = live_or_stale(local, digests)?
        .into_iter()
        .filter_map(|(key, live)| live.is_none().then_some(key))
        .collect();
    for key in stale {
        local.remove(key.as_str()).map_err(engine)?;
    }
    Ok(())
}

/// The live marks: each key with its object's length.
pub(super) fn live(
    local: &impl ReadableTable<&'static str, Digest>,
    digests: &impl ReadableTable<&'static str, Digest>,
) -> Result<Vec<(String, u64)>, StoreError> {
    Ok(live_or_stale(local, digests)?
        .into_iter()
        .filter_map(|(key, length)| Some((key, length?)))
        .collect())
}

/// Drops the marks of a removed component (keys under `prefix`).
pub(super) fn clear(local: &mut Table<&str, Digest>, prefix: &str) -> Result<(), StoreError> {
    let end = prefix_end(prefix);
    local
        .retain_in(prefix..end.as_str(), |_, _| false)
        .map_err(engine)
}

/// Every mark, with its object's length while the mark is live.
fn live_or_stale(
    local: &impl ReadableTable<&'static str, Digest>,
    digests: &impl ReadableTable<&'static str, Digest>,
) -> Result<Vec<(String, Option<u64>)>, StoreError> {
    let mut marks = Vec::new();
    for entry in local.iter().map_err(engine)? {
        let (key, marked) = entry.map_err(engine)?;
        let marked = marked.value();
        let stored = digests.get(key.value()).map_err(engine)?;
        let live = stored.is_some_and(|stored| stored.value() == marked);
        marks.push((key.value().to_owned(), live.then_some(marked.0)));
    }
    Ok(marks)
}
