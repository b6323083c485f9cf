//! Sets in the store: a list's commit, which replaces its set's members, and the sets'
//! metadata (synced resourceVersion, stale mark, where their history starts).

use redb::{ReadableTable, Table};

use super::digest;
use super::history::{self, Tables};
use super::tables::{Digest, UNCHANGED, encoding, engine, prefix_end, put};
use crate::cache::key::SetKey;
use crate::cache::selectors::Selectors;
use crate::cache::store::{History, SetMeta, StoreError};
use crate::stream::compare_versions;

/// Moves list `list`'s staged items into `objects`, and writes `set`'s new metadata `meta`.
/// The set's members the list no longer holds leave it (see [`history::leave`]), at the
/// list's version; they are found by their digests, and only those the list does not hold
/// are read (when the set has selectors, to see whether they select them).
pub(super) fn commit(
    tables: &mut Tables<'_, '_>,
    staging: &mut Table<(u64, &str), &[u8]>,
    list: u64,
    set: &SetKey,
    mut meta: SetMeta,
) -> Result<(), StoreError> {
    let encoded = set.encode();
    let old = match tables.sets.get(encoded.as_str()).map_err(engine)? {
        Some(old) => Some(read_meta(old.value(), &encoded)?),
        None => None,
    };
    // The history goes on across lists: what a list no longer holds leaves at its version.
    meta.tombstones = old.as_ref().map_or(0, |old| old.tombstones);
    meta.history_from = match old {
        Some(old) if !old.history_from.is_empty() => old.history_from,
        Some(old) => old.resource_version,
        None => meta.resource_version.clone(),
    };
    meta.stale = false;
    write_meta(tables.sets, &encoded, &meta)?;
    let prefix = set.resource.namespace_prefix(&set.namespace);
    let end = prefix_end(&prefix);
    match Selectors::of_set(set) {
        Ok(selection) => {
            let mut stale = Vec::new();
            for entry in tables
                .digests
                .range(prefix.as_str()..end.as_str())
                .map_err(engine)?
            {
                let (key, _) = entry.map_err(engine)?;
                let key = key.value();
                // Keep what the new list holds (overwritten below) and what is no member
                // (never selected, or gone already); on a read error, keep.
                if staging
                    .get((list, key))
                    .map_or(true, |found| found.is_some())
                {
                    continue;
                }
                let Ok(Some(stored)) = tables.objects.get(key) else {
                    continue;
                };
                let stored = stored.value();
                if selection.matches(stored)
                    && !history::has_left(&*tables.history, &encoded, key, stored)?
                {
                    stale.push((
                        key.to_owned(),
                        history::at_version(stored, &meta.resource_version),
                    ));
                }
            }
            for (key, last) in stale {
                history::leave(tables, set, &key, &last)?;
            }
        }
        Err(error) => {
            tracing::warn!(%error, set = %encoded, "not removing stale members of a set whose selector cannot be read");
        }
    }
    let mut returned = 0;
    let departures = match tables.sets.get(encoded.as_str()).map_err(engine)? {
        Some(current) => read_meta(current.value(), &encoded)?.tombstones,
        None => 0,
    };
    for entry in staging.range((list, "")..(list + 1, "")).map_err(engine)? {
        let (key, value) = entry.map_err(engine)?;
        let key = key.value().1;
        if value.value() != UNCHANGED {
            let object = value.value();
            put(
                tables.objects,
                tables.digests,
                key,
                object,
                digest::of(object),
            )?;
        }
        // A member that had left the set is back.
        if departures > returned {
            let left = matches!(
                tables
                    .history
                    .get((encoded.as_str(), key))
                    .map_err(engine)?
                    .and_then(|entry| history::decode(entry.value())),
                Some(History::Left(_))
            );
            if left {
                tables
                    .history
                    .remove((encoded.as_str(), key))
                    .map_err(engine)?;
                returned += 1;
            }
        }
    }
    staging
        .retain_in((list, "")..(list + 1, ""), |_, _| false)
        .map_err(engine)?;
    if returned > 0 {
        let current = match tables.sets.get(encoded.as_str()).map_err(engine)? {
            Some(current) => Some(read_meta(current.value(), &encoded)?),
            None => None,
        };
        if let Some(mut current) = current {
            current.tombstones = current.tombstones.saturating_sub(returned);
            write_meta(tables.sets, &encoded, &current)?;
        }
    }
    Ok(())
}

/// Writes the metadata of the set stored under `key`.
fn write_meta(sets: &mut Table<&str, &[u8]>, key: &str, meta: &SetMeta) -> Result<(), StoreError> {
    let meta = serde_json::to_vec(meta).map_err(encoding)?;
    sets.insert(key, meta.as_slice()).map_err(engine)?;
    Ok(())
}

/// Reads the metadata of the set stored under `key`.
pub(super) fn read_meta(current: &[u8], key: &str) -> Result<SetMeta, StoreError> {
    serde_json::from_slice(current).map_err(|_| StoreError::Corrupt(key.to_owned()))
}

/// The metadata of the set stored under `key` as `current`, moved to `resource_version`, or
/// `None` when the set is there already (or past it), or stale: a set that lost an event is
/// never synced past it.
pub(super) fn synced_meta(
    current: &[u8],
    key: &str,
    resource_version: &str,
) -> Result<Option<SetMeta>, StoreError> {
    let mut meta = read_meta(current, key)?;
    let newer =
        compare_versions(resource_version, &meta.resource_version).is_none_or(|o| o.is_gt());
    if meta.stale || !newer {
        return Ok(None);
    }
    if meta.history_from.is_empty() {
        // Written before histories were kept: complete from here on.
        meta.history_from = std::mem::take(&mut meta.resource_version);
    }
    meta.resource_version = resource_version.to_owned();
    Ok(Some(meta))
}

/// Notes an own write at `resource_version` in `set`, if it was ever listed: its
/// `own_writes_from` becomes the lower of it and the one noted before.
pub(super) fn mark_own_write(
    sets: &mut Table<&str, &[u8]>,
    set: &SetKey,
    resource_version: &str,
) -> Result<(), StoreError> {
    let key = set.encode();
    let meta = match sets.get(key.as_str()).map_err(engine)? {
        Some(current) => Some(read_meta(current.value(), &key)?),
        None => None,
    };
    let Some(mut meta) = meta else {
        return Ok(());
    };
    let lower = meta.own_writes_from.is_empty()
        || compare_versions(resource_version, &meta.own_writes_from).is_some_and(|o| o.is_lt());
    if lower {
        meta.own_writes_from = resource_version.to_owned();
        write_meta(sets, &key, &meta)?;
    }
    Ok(())
}

/// Marks `set` stale, if it was ever listed.
pub(super) fn mark_stale(sets: &mut Table<&str, &[u8]>, set: &SetKey) -> Result<(), StoreError> {
    let key = set.encode();
    let meta = match sets.get(key.as_str()).map_err(engine)? {
        Some(current) => Some(read_meta(current.value(), &key)?),
        None => None,
    };
    if let Some(mut meta) = meta.filter(|meta| !meta.stale) {
        meta.stale = true;
        write_meta(sets, &key, &meta)?;
    }
    Ok(())
}

/// Moves `set`'s synced resourceVersion to `resource_version` (when it holds an older one);
/// whether it moved. A set never listed is not synced.
pub(super) fn sync(
    sets: &mut Table<&str, &[u8]>,
    set: &SetKey,
    resource_version: &str,
) -> Result<bool, StoreError> {
    let key = set.encode();
    let moved = match sets.get(key.as_str()).map_err(engine)? {
        Some(current) => synced_meta(current.value(), &key, resource_version)?,
        None => None,
    };
    let Some(meta) = moved else {
        return Ok(false);
    };
    let meta = serde_json::to_vec(&meta).map_err(encoding)?;
    sets.insert(key.as_str(), meta.as_slice()).map_err(engine)?;
    Ok(true)
}

/// Stages item `key` of list `list`: a bare key ([`UNCHANGED`]) when the store holds the
/// same bytes, else `object`.
pub(super) fn stage(
    staging: &mut Table<(u64, &str), &[u8]>,
    digests: &impl ReadableTable<&'static str, Digest>,
    list: u64,
    key: &str,
    object: &[u8],
) -> Result<(), StoreError> {
    let unchanged = digests
        .get(key)
        .map_err(engine)?
        .is_some_and(|stored| stored.value() == digest::of(object));
    let staged = if unchanged { UNCHANGED } else { object };
    staging.insert((list, key), staged).map_err(engine)?;
    Ok(())
}

/// Discards what list `list` staged: it broke off.
pub(super) fn abort(staging: &mut Table<(u64, &str), &[u8]>, list: u64) -> Result<(), StoreError> {
    staging
        .retain_in((list, "")..(list + 1, ""), |_, _| false)
        .map_err(engine)
}
