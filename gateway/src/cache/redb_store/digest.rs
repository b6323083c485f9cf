//! What the store compares objects by: each object's length and XXH3-128 hash, kept in a
//! table of their own under the objects' keys, so that comparing an item with the stored
//! object, or walking a set's members, reads a few bytes per object instead of the object.

use bytes::Bytes;
use redb::{ReadableTable, ReadableTableMetadata, Table};
use xxhash_rust::xxh3::xxh3_128;

use super::tables::{Digest, engine};
use crate::cache::store::StoreError;

/// The digest of `object`.
pub(super) fn of(object: &[u8]) -> Digest {
    (object.len() as u64, xxh3_128(object))
}

/// Makes `digests` hold the digest of every object, computing them all when the two tables
/// do not have as many entries (a store written before digests were kept).
pub(super) fn complete(
    objects: &impl ReadableTable<&'static str, &'static [u8]>,
    digests: &mut Table<&str, Digest>,
) -> Result<(), StoreError> {
    let count = objects.len().map_err(engine)?;
    if count == digests.len().map_err(engine)? {
        return Ok(());
    }
    digests.retain(|_, _| false).map_err(engine)?;
    for entry in objects.iter().map_err(engine)? {
        let (key, object) = entry.map_err(engine)?;
        digests
            .insert(key.value(), of(object.value()))
            .map_err(engine)?;
    }
    tracing::info!(objects = count, "digests of the stored objects computed");
    Ok(())
}

/// `object`, read under `key`, when `stored` (the digest read beside it, with its key) is
/// its own; otherwise the store is corrupt. redb verifies its page checksums only when it
/// repairs a file, so a page changed under it (a failing card, a stray write) reads back
/// without an error: the digest is what keeps such bytes from being served.
pub(super) fn verified(
    key: &str,
    object: &[u8],
    stored: Option<(&str, Digest)>,
) -> Result<Bytes, StoreError> {
    match stored {
        Some((at, digest)) if at == key && digest == of(object) => {
            Ok(Bytes::copy_from_slice(object))
        }
        _ => Err(StoreError::Corrupt(format!(
            "{key} (its bytes do not match their digest)"
        ))),
    }
}
