//! What a write would leave as it is: an upsert of an object the store holds as it is (or
//! newer), and a batch of such writes, found with a read transaction instead of a write.

use redb::{Database, ReadableDatabase, ReadableTable};

use super::digest;
use super::history::{self, HISTORY};
use super::sets::synced_meta;
use super::tables::Digest;
use super::tables::{DIGESTS, OBJECTS, SETS, engine};
use crate::cache::store::{History, StoreError, WriteOp};
use crate::stream::{Meta, compare_versions};

/// Whether `ops` would leave the store as it is: each an upsert of an object stored as it
/// is (or newer), a sync of a set to a version it holds (or of a set never listed), or an
/// entry its set's history holds (the watches of one set all bring its ADDED events).
/// Most single-object GETs bring back what the store holds, and a read transaction
/// costs a fraction of a write transaction, even of one given up without a commit.
pub(super) fn changes_nothing(db: &Database, ops: &[WriteOp]) -> Result<bool, StoreError> {
    let may_change_nothing = ops.iter().all(|op| {
        matches!(
            op,
            WriteOp::Upsert { .. } | WriteOp::Synced { .. } | WriteOp::Entered { .. }
        )
    });
    if !may_change_nothing {
        return Ok(false);
    }
    let txn = db.begin_read().map_err(engine)?;
    let objects = txn.open_table(OBJECTS).map_err(engine)?;
    let digests = txn.open_table(DIGESTS).map_err(engine)?;
    let sets = txn.open_table(SETS).map_err(engine)?;
    let history = txn.open_table(HISTORY).map_err(engine)?;
    for op in ops {
        let unchanged = match op {
            WriteOp::Upsert {
                key,
                object,
                resource_version,
            } => keeps(
                &Stored {
                    objects: &objects,
                    digests: &digests,
                    history: &history,
                    sets: &sets,
                },
                key,
                digest::of(object),
                resource_version,
            )?,
            WriteOp::Synced {
                set,
                resource_version,
            } => {
                let key = set.encode();
                match sets.get(key.as_str()).map_err(engine)? {
                    Some(current) => {
                        synced_meta(current.value(), &key, resource_version)?.is_none()
                    }
                    None => true,
                }
            }
            WriteOp::Entered {
                set,
                key,
                resource_version,
            } => {
                let encoded = set.encode();
                sets.get(encoded.as_str()).map_err(engine)?.is_none()
                    || history
                        .get((encoded.as_str(), key.as_str()))
                        .map_err(engine)?
                        .and_then(|entry| history::decode(entry.value()))
                        == Some(History::Entered(resource_version.clone()))
            }
            _ => false,
        };
        if !unchanged {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The tables an upsert reads to decide whether it writes.
pub(super) struct Stored<'a, O, D, H, S> {
    pub(super) objects: &'a O,
    pub(super) digests: &'a D,
    pub(super) history: &'a H,
    pub(super) sets: &'a S,
}

impl<'a, O, D, H, S> Stored<'a, O, D, H, S> {
    /// The tables an upsert reads.
    pub(super) fn of(objects: &'a O, digests: &'a D, history: &'a H, sets: &'a S) -> Self {
        Stored {
            objects,
            digests,
            history,
            sets,
        }
    }
}

/// Whether an upsert of an object whose digest is `digest`, at `resource_version`, leaves
/// the store as it is: the same object is stored (by digest, without reading it), or a
/// newer version of it, or none because it was deleted at that version or later. The
/// watches of one set tee the same events, a GET mostly brings back what the store holds,
/// and the response to a GET or a write can reach the writer after the watch event that
/// deleted its object.
pub(super) fn keeps<O, D, H, S>(
    stored: &Stored<'_, O, D, H, S>,
    key: &str,
    digest: Digest,
    resource_version: &str,
) -> Result<bool, StoreError>
where
    O: ReadableTable<&'static str, &'static [u8]>,
    D: ReadableTable<&'static str, Digest>,
    H: ReadableTable<(&'static str, &'static str), &'static [u8]>,
    S: ReadableTable<&'static str, &'static [u8]>,
{
    if stored
        .digests
        .get(key)
        .map_err(engine)?
        .is_some_and(|stored| stored.value() == digest)
    {
        return Ok(true);
    }
    match stored.objects.get(key).map_err(engine)? {
        Some(object) => Ok(newer_than(object.value(), resource_version)),
        None => history::deleted_since(stored.history, stored.sets, key, resource_version),
    }
}

/// Whether the stored object has a newer resourceVersion than `incoming`. The stored object
/// was read whole before it was stored, so only its metadata is read again.
fn newer_than(stored: &[u8], incoming: &str) -> bool {
    let Ok(stored) = Meta::parse_checked(stored) else {
        return false;
    };
    compare_versions(&stored.resource_version, incoming).is_some_and(|o| o.is_gt())
}
