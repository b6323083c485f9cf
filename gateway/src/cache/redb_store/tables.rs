//! The store's tables and what every part of it uses to read and write them: the table
//! definitions, the one way an engine failure becomes a [`StoreError`], key ranges.

use redb::TableDefinition;

use crate::cache::store::{StoreError, VersionClock};

/// Objects by YurtHub key.
pub(super) const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
/// Items of lists still streaming, by list and object key.
pub(super) const STAGING: TableDefinition<(u64, &str), &[u8]> = TableDefinition::new("staging");
/// The staged value of an item whose stored object is byte for byte the same (no object
/// encodes to zero bytes).
pub(super) const UNCHANGED: &[u8] = b"";
/// Committed list sets: encoded set key → [`SetMeta`](crate::cache::store::SetMeta) as JSON.
pub(super) const SETS: TableDefinition<&str, &[u8]> = TableDefinition::new("sets");
/// Components → last use (seconds of running time, [`RUNNING`]).
pub(super) const COMPONENTS: TableDefinition<&str, u64> = TableDefinition::new("components");
/// Clocks by name: [`RUNNING`] and the resourceVersion clocks ([`clock_name`]).
pub(super) const CLOCKS: TableDefinition<&str, u64> = TableDefinition::new("clocks");
/// Seconds the gateway has run over this store, over all its starts.
pub(super) const RUNNING: &str = "running";

/// The name a resourceVersion clock is kept under in [`CLOCKS`].
pub(super) fn clock_name(clock: VersionClock) -> &'static str {
    match clock {
        VersionClock::Cloud => "cloud",
        VersionClock::Local => "local",
    }
}

/// An object's length and XXH3-128 hash. Objects with equal digests are taken to be the
/// same bytes: by chance, two differ with a probability of 2⁻¹²⁸; on purpose, only a filter
/// could make two, and as a replacement keeps the key of the object it replaces, it gains
/// nothing it could not have by returning the stored bytes.
pub(super) type Digest = (u64, u128);

/// Digests by object key: exactly the keys of the objects table.
pub(super) const DIGESTS: TableDefinition<&str, Digest> = TableDefinition::new("digests");

/// A failure of the storage engine, kept as redb's one error type so that what it says
/// (a corrupt page, an I/O error) can be told apart later ([`StoreError::is_damage`]).
pub(super) fn engine(error: impl Into<redb::Error>) -> StoreError {
    StoreError::Engine(Box::new(error.into()))
}

/// Set metadata that cannot be encoded.
pub(super) fn encoding(error: serde_json::Error) -> StoreError {
    StoreError::Engine(Box::new(error))
}

/// The smallest string greater than every string starting with `prefix`.
pub(super) fn prefix_end(prefix: &str) -> String {
    let mut end = prefix.to_owned();
    while let Some(last) = end.pop() {
        if let Some(next) = char::from_u32(last as u32 + 1) {
            end.push(next);
            return end;
        }
    }
    String::from(char::MAX)
}

/// Stores `object` under `key`, with its digest `digest`.
pub(super) fn put(
    objects: &mut redb::Table<&str, &[u8]>,
    digests: &mut redb::Table<&str, Digest>,
    key: &str,
    object: &[u8],
    digest: Digest,
) -> Result<(), StoreError> {
    objects.insert(key, object).map_err(engine)?;
    digests.insert(key, digest).map_err(engine)?;
    Ok(())
}
