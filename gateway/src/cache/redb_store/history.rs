//! Each set's history: which keys entered it and when (its watch's ADDED events), and which
//! left it, with their last state (its watch's DELETED events, and members its lists no
//! longer held). Objects are stored once per key and shared by the component's sets, so
//! leaving a set is not leaving the store: a DELETED event on a selector watch may only mean
//! "no longer selected". An object is a member of a set when it is under the set's
//! namespace, its selectors select it, and the set's history has no departure of it at its
//! version or later. The history is what an offline watch replays.

use bytes::Bytes;
use redb::{ReadableTable, Table, TableDefinition};

use super::tables::{Digest, encoding, engine, prefix_end};
use crate::cache::key::{ResourceKey, SetKey};
use crate::cache::selectors::Selectors;
use crate::cache::store::{History, SetMeta, StoreError};
use crate::stream::{Meta, compare_versions};

/// The histories: (encoded set key, object key) → an [`Entry`] as bytes.
pub(super) const HISTORY: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("history");

/// Departures a set keeps before the oldest are pruned (down to half as many): each holds
/// the object's last state, so this bounds what a set's deletions cost the disk, while an
/// offline watch from any version since the oldest kept is still answered exactly.
pub(super) const MAX_TOMBSTONES: u64 = 1024;

/// Tags of the stored entries.
const ENTERED: u8 = b'+';
const LEFT: u8 = b'-';

/// An entry as stored: a tag, then the resourceVersion (entered) or the object (left).
fn encode(entry: &History) -> Vec<u8> {
    let (tag, payload) = match entry {
        History::Entered(rv) => (ENTERED, rv.as_bytes()),
        History::Left(object) => (LEFT, object.as_ref()),
    };
    let mut bytes = Vec::with_capacity(payload.len() + 1);
    bytes.push(tag);
    bytes.extend_from_slice(payload);
    bytes
}

/// Reads a stored entry; `None` for bytes no version wrote.
pub(super) fn decode(bytes: &[u8]) -> Option<History> {
    match bytes.split_first()? {
        (&ENTERED, rv) => Some(History::Entered(String::from_utf8(rv.to_vec()).ok()?)),
        (&LEFT, object) => Some(History::Left(Bytes::copy_from_slice(object))),
        _ => None,
    }
}

/// The smallest encoded set key after `set`'s, so that `(set, "")..(after, "")` is exactly
/// the set's history.
pub(super) fn bounds(set: &str) -> ((&str, &str), String) {
    ((set, ""), format!("{set}\0"))
}

/// Whether the stored `object` under `key` has left `set` (at its version or later).
pub(super) fn has_left(
    history: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    set: &str,
    key: &str,
    object: &[u8],
) -> Result<bool, StoreError> {
    let Some(entry) = history.get((set, key)).map_err(engine)? else {
        return Ok(false);
    };
    Ok(decode(entry.value()).is_some_and(|entry| entry.hides(object)))
}

/// Whether the object under `key` was deleted at `resource_version` or later: a set of its
/// resource recorded its departure with a last state the set still selects. A departure
/// whose last state the set no longer selects only says the object stopped matching; it
/// still exists.
pub(super) fn deleted_since(
    history: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>,
    sets: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
    resource_version: &str,
) -> Result<bool, StoreError> {
    let Some(resource) = key
        .match_indices('/')
        .nth(1)
        .and_then(|(end, _)| ResourceKey::parse(&key[..end]))
    else {
        return Ok(false);
    };
    let prefix = SetKey::resource_prefix(&resource);
    let end = prefix_end(&prefix);
    for entry in sets.range(prefix.as_str()..end.as_str()).map_err(engine)? {
        let (encoded, _) = entry.map_err(engine)?;
        let encoded = encoded.value();
        let Some(History::Left(last)) = history
            .get((encoded, key))
            .map_err(engine)?
            .and_then(|entry| decode(entry.value()))
        else {
            continue;
        };
        let deleted = SetKey::decode(encoded)
            .is_some_and(|set| Selectors::of_set(&set).is_ok_and(|s| s.matches(&last)));
        let at_or_after = Meta::parse(&last).is_ok_and(|m| {
            compare_versions(&m.resource_version, resource_version).is_some_and(|o| o.is_ge())
        });
        if deleted && at_or_after {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Records that `key` entered `set` at `resource_version`, if the set was ever listed and
/// its history holds nothing of `key` at that version or later. The set's watches tee the
/// same events at different positions: a lagging one's ADDED must not erase the departure
/// (or later entry) a watch ahead of it recorded, or an offline watch would replay neither.
pub(super) fn entered(
    history: &mut Table<(&str, &str), &[u8]>,
    sets: &impl ReadableTable<&'static str, &'static [u8]>,
    set: &SetKey,
    key: &str,
    resource_version: &str,
) -> Result<(), StoreError> {
    let encoded = set.encode();
    if sets.get(encoded.as_str()).map_err(engine)?.is_none() {
        return Ok(());
    }
    let recorded = history
        .get((encoded.as_str(), key))
        .map_err(engine)?
        .and_then(|entry| decode(entry.value()))
        .map(|entry| match entry {
            History::Entered(rv) => rv,
            History::Left(last) => {
                Meta::parse(&last).map_or_else(|_| String::new(), |m| m.resource_version.into())
            }
        });
    if recorded.is_some_and(|rv| compare_versions(&rv, resource_version).is_some_and(|o| o.is_ge()))
    {
        return Ok(());
    }
    let entry = encode(&History::Entered(resource_version.to_owned()));
    history
        .insert((encoded.as_str(), key), entry.as_slice())
        .map_err(engine)?;
    Ok(())
}

/// The tables a departure touches.
pub(super) struct Tables<'a, 'txn> {
    pub(super) objects: &'a mut Table<'txn, &'static str, &'static [u8]>,
    pub(super) digests: &'a mut Table<'txn, &'static str, Digest>,
    pub(super) history: &'a mut Table<'txn, (&'static str, &'static str), &'static [u8]>,
    pub(super) sets: &'a mut Table<'txn, &'static str, &'static [u8]>,
}

/// `key` left `set`, its last state being `last` (at the version at which it left). It
/// leaves the store too when the set has no selectors (it is gone from the namespace) or no
/// other set of the component holds it; then every set that held it records the departure.
/// A departure older than the stored object changes nothing.
pub(super) fn leave(
    tables: &mut Tables<'_, '_>,
    set: &SetKey,
    key: &str,
    last: &[u8],
) -> Result<(), StoreError> {
    let stored = tables
        .objects
        .get(key)
        .map_err(engine)?
        .map(|o| o.value().to_vec());
    let departure = History::Left(Bytes::copy_from_slice(last));
    if stored.as_deref().is_some_and(|o| !departure.hides(o)) {
        return Ok(());
    }
    let current = stored.as_deref().unwrap_or(last);
    let holders = holders(tables, set, key, current)?;
    let gone = set.label_selector.is_empty() && set.field_selector.is_empty();
    if gone || holders.is_empty() {
        tables.objects.remove(key).map_err(engine)?;
        tables.digests.remove(key).map_err(engine)?;
        for holder in &holders {
            record_departure(tables, holder, key, last)?;
        }
    }
    record_departure(tables, &set.encode(), key, last)
}

/// The other listed sets of `set`'s component and resource that hold `object` under `key`.
fn holders(
    tables: &Tables<'_, '_>,
    set: &SetKey,
    key: &str,
    object: &[u8],
) -> Result<Vec<String>, StoreError> {
    let prefix = SetKey::resource_prefix(&set.resource);
    let end = prefix_end(&prefix);
    let own = set.encode();
    let mut holders = Vec::new();
    for entry in tables
        .sets
        .range(prefix.as_str()..end.as_str())
        .map_err(engine)?
    {
        let (encoded, _) = entry.map_err(engine)?;
        let encoded = encoded.value();
        let Some(other) = SetKey::decode(encoded).filter(|_| encoded != own) else {
            continue;
        };
        let under = key.starts_with(&other.resource.namespace_prefix(&other.namespace));
        let selected = Selectors::of_set(&other).is_ok_and(|s| s.matches(object));
        if under && selected && !has_left(&*tables.history, encoded, key, object)? {
            holders.push(encoded.to_owned());
        }
    }
    Ok(holders)
}

/// Writes the departure of `key` from the set encoded as `set` (if it was ever listed),
/// counting it, and pruning the set's oldest departures when there are too many.
fn record_departure(
    tables: &mut Tables<'_, '_>,
    set: &str,
    key: &str,
    last: &[u8],
) -> Result<(), StoreError> {
    let meta = match tables.sets.get(set).map_err(engine)? {
        Some(meta) => serde_json::from_slice::<SetMeta>(meta.value()),
        None => return Ok(()),
    };
    let mut meta = meta.map_err(|_| StoreError::Corrupt(set.to_owned()))?;
    let entry = encode(&History::Left(Bytes::copy_from_slice(last)));
    let previous = tables
        .history
        .insert((set, key), entry.as_slice())
        .map_err(engine)?;
    if previous.is_none_or(|p| p.value().first() != Some(&LEFT)) {
        meta.tombstones += 1;
    }
    if meta.tombstones > MAX_TOMBSTONES {
        prune(tables.history, set, &mut meta)?;
    }
    let meta = serde_json::to_vec(&meta).map_err(encoding)?;
    tables.sets.insert(set, meta.as_slice()).map_err(engine)?;
    Ok(())
}

/// Drops the oldest departures of `set` down to half of [`MAX_TOMBSTONES`]; the history is
/// then complete only from the newest version dropped.
fn prune(
    history: &mut Table<(&str, &str), &[u8]>,
    set: &str,
    meta: &mut SetMeta,
) -> Result<(), StoreError> {
    let (from, end) = bounds(set);
    let mut departures = Vec::new();
    for entry in history.range(from..(end.as_str(), "")).map_err(engine)? {
        let (key, value) = entry.map_err(engine)?;
        if let Some(History::Left(last)) = decode(value.value()) {
            let rv = Meta::parse(&last).map_or(0, |m| m.resource_version.parse().unwrap_or(0));
            departures.push((rv, key.value().1.to_owned()));
        }
    }
    departures.sort_unstable();
    let drop = departures
        .len()
        .saturating_sub((MAX_TOMBSTONES / 2) as usize);
    for (_, key) in &departures[..drop] {
        history.remove((set, key.as_str())).map_err(engine)?;
    }
    if let Some((newest, _)) = departures[..drop].last() {
        meta.history_from = newest.to_string();
    }
    meta.tombstones = (departures.len() - drop) as u64;
    Ok(())
}

/// `object` with `metadata.resourceVersion` set to `resource_version`: a member a list no
/// longer holds left the set at the list's version. `object` unchanged if it cannot be read.
pub(super) fn at_version(object: &[u8], resource_version: &str) -> Bytes {
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(object) else {
        return Bytes::copy_from_slice(object);
    };
    if let Some(metadata) = value
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
    {
        metadata.insert(
            "resourceVersion".to_owned(),
            serde_json::Value::String(resource_version.to_owned()),
        );
    }
    serde_json::to_vec(&value).map_or_else(|_| Bytes::copy_from_slice(object), Bytes::from)
}
