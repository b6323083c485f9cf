//! What a write would leave as it is: an upsert of an object the store holds as it is (or
//! newer), and a batch of such writes, found with a read transaction instead of a write;
//! and an upsert's write when it would not.

use redb::{Database, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable, Table};

use super::digest;
use super::history::{self, HISTORY};
use super::sets::synced_meta;
use super::tables::Digest;
use super::tables::{DIGESTS, OBJECTS, SETS, engine, put};
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
            WriteOp::Upsert { .. }
                | WriteOp::Fetched { .. }
                | WriteOp::Synced { .. }
                | WriteOp::Entered { .. }
        )
    });
    if !may_change_nothing {
        return Ok(false);
    }
    let txn = db.begin_read().map_err(engine)?;
    let mut tables = Opened::new(&txn);
    for op in ops {
        let unchanged = match op {
            WriteOp::Upsert { .. } | WriteOp::Fetched { .. } => tables.keep(op)?,
            WriteOp::Synced {
                set,
                resource_version,
            } => {
                let key = set.encode();
                match tables.rest()?.2.get(key.as_str()).map_err(engine)? {
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
                let (_, history, sets) = tables.rest()?;
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

type Objects = ReadOnlyTable<&'static str, &'static [u8]>;
type Digests = ReadOnlyTable<&'static str, Digest>;
type Histories = ReadOnlyTable<(&'static str, &'static str), &'static [u8]>;
type Sets = ReadOnlyTable<&'static str, &'static [u8]>;

/// The tables of a read transaction, each opened when an op first reads it: a batch of
/// GETs that brought back what the store holds reads the digests alone, and opening a
/// table costs a lookup of its name and a check of its definition.
struct Opened<'t> {
    txn: &'t ReadTransaction,
    digests: Option<Digests>,
    rest: Option<(Objects, Histories, Sets)>,
}

impl<'t> Opened<'t> {
    /// None opened yet.
    fn new(txn: &'t ReadTransaction) -> Self {
        Opened {
            txn,
            digests: None,
            rest: None,
        }
    }

    /// The digests, which every upsert reads.
    fn digests(&mut self) -> Result<&Digests, StoreError> {
        let digests = match self.digests.take() {
            Some(digests) => digests,
            None => self.txn.open_table(DIGESTS).map_err(engine)?,
        };
        Ok(self.digests.insert(digests))
    }

    /// Whether `op`, an upsert or a fetched object, leaves the store as it is.
    fn keep(&mut self, op: &WriteOp) -> Result<bool, StoreError> {
        let Some((key, object, resource_version)) = op.upserted() else {
            return Ok(false);
        };
        if same_digest(self.digests()?, key, digest::of(object))? {
            return Ok(true);
        }
        let (objects, history, sets) = self.rest()?;
        let stored = Stored {
            objects,
            history,
            sets,
        };
        keeps_version(&stored, key, resource_version)
    }

    /// The objects, the sets' histories and the sets: what an upsert of another object
    /// than the stored one reads, and a set's sync or entry.
    fn rest(&mut self) -> Result<(&Objects, &Histories, &Sets), StoreError> {
        let rest = match self.rest.take() {
            Some(rest) => rest,
            None => (
                self.txn.open_table(OBJECTS).map_err(engine)?,
                self.txn.open_table(HISTORY).map_err(engine)?,
                self.txn.open_table(SETS).map_err(engine)?,
            ),
        };
        let (objects, history, sets) = self.rest.insert(rest);
        Ok((objects, history, sets))
    }
}

/// The tables an upsert of another object than the stored one reads to decide whether
/// it writes.
struct Stored<'a, O, H, S> {
    objects: &'a O,
    history: &'a H,
    sets: &'a S,
}

/// Whether the store holds an object of digest `digest` under `key`: the same object,
/// which an upsert leaves as it is, compared without reading it.
fn same_digest(
    digests: &impl ReadableTable<&'static str, Digest>,
    key: &str,
    digest: Digest,
) -> Result<bool, StoreError> {
    Ok(digests
        .get(key)
        .map_err(engine)?
        .is_some_and(|stored| stored.value() == digest))
}

/// Whether an upsert of another object than the stored one (by [`same_digest`]), at
/// `resource_version`, leaves the store as it is: a newer version of it is stored, or none
/// because it was deleted at that version or later. The watches of one set tee the same
/// events, a GET mostly brings back what the store holds, and the response to a GET or a
/// write can reach the writer after the watch event that deleted its object.
fn keeps_version<O, H, S>(
    stored: &Stored<'_, O, H, S>,
    key: &str,
    resource_version: &str,
) -> Result<bool, StoreError>
where
    O: ReadableTable<&'static str, &'static [u8]>,
    H: ReadableTable<(&'static str, &'static str), &'static [u8]>,
    S: ReadableTable<&'static str, &'static [u8]>,
{
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

/// Writes an upserted or fetched object unless the store keeps it as it is
/// ([`same_digest`], [`keeps_version`]); a fetched one only if it reads whole
/// ([`Meta::reads_whole`]). False for a fetched object that does not read, true otherwise.
pub(super) fn upsert(
    objects: &mut Table<&'static str, &'static [u8]>,
    digests: &mut Table<&'static str, Digest>,
    history: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    sets: &impl ReadableTable<&'static str, &'static [u8]>,
    op: &WriteOp,
) -> Result<bool, StoreError> {
    let Some((key, object, resource_version)) = op.upserted() else {
        return Ok(true);
    };
    let digest = digest::of(object);
    let stored = Stored {
        objects: &*objects,
        history,
        sets,
    };
    if same_digest(&*digests, key, digest)? || keeps_version(&stored, key, resource_version)? {
        return Ok(true);
    }
    if matches!(op, WriteOp::Fetched { .. }) && !Meta::reads_whole(object) {
        return Ok(false);
    }
    put(objects, digests, key, object, digest)?;
    Ok(true)
}
