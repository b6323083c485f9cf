//! Splitting an object's bytes into its entries, each a [`Node`] over a range of those bytes.
//! The top level is split in one scan that also splits each top-level object (`metadata`,
//! `spec`, `status`) into its entries, so reading a name or a label costs one pass over the
//! head, and reading `spec.type` one pass over the fields after it.
//!
//! The scan finds where values end; it does not check them. Strings and nested values are
//! skipped 32 bytes at a time by `edgegate_json_scan`, escapes included (the guest's
//! `serde_json` steps four bytes at a time on wasm32, and stops at every escape). A value is
//! checked when it is parsed, so a filter never acts on text that is not JSON: what it never
//! reads, it passes on as it came, as the gateway does for a response no filter handles.

use std::ops::{ControlFlow, Range};

use edgegate_json_scan::Cursor;

use super::key::{Build, Entries, FieldRange, Key};

/// The entries of the JSON object `bytes` up to and including `metadata` (already split into
/// its own), and where the entries after it begin: `None` when the object ended first, its
/// end checked to be the end of the bytes. `None` when the bytes do not begin as one object.
pub(super) fn head<N: Build>(bytes: &[u8]) -> Option<(Entries<N>, Option<usize>)> {
    let mut cursor = Cursor::new(bytes, 0);
    let mut entries = Vec::with_capacity(8);
    if cursor.open(b'{', b'}')? {
        return cursor.end().map(|()| (entries, None));
    }
    loop {
        let (key, node) = cursor.top_level_entry()?;
        let metadata = key.is(bytes, "metadata");
        entries.push((key, node));
        if metadata {
            return Some((entries, Some(cursor.at)));
        }
        if !cursor.more(b'}')? {
            return cursor.end().map(|()| (entries, None));
        }
    }
}

/// The entries of the JSON object `bytes` after the value that [`head`] stopped at, `at`;
/// `None` when the rest is not the rest of one object.
pub(super) fn rest<N: Build>(bytes: &[u8], at: usize) -> Option<Entries<N>> {
    let mut cursor = Cursor::new(bytes, at);
    let mut entries = Vec::new();
    while cursor.more(b'}')? {
        entries.push(cursor.top_level_entry()?);
    }
    cursor.end().map(|()| entries)
}

/// The entries of the value at `raw` in `bytes`; `None` when it is not an object.
pub(super) fn entries<N: Build>(bytes: &[u8], raw: Range<usize>) -> Option<Entries<N>> {
    let mut cursor = Cursor::new(bytes.get(..raw.end)?, raw.start);
    cursor.object().map(|(entries, _)| entries)
}

/// The items of the array at `raw` in `bytes`; `None` when it is not an array.
pub(super) fn items<N: Build>(bytes: &[u8], raw: Range<usize>) -> Option<Vec<N>> {
    let mut cursor = Cursor::new(bytes.get(..raw.end)?, raw.start);
    let mut items = Vec::new();
    if cursor.open(b'[', b']')? {
        return Some(items);
    }
    loop {
        cursor.space();
        items.push(N::value(cursor.value()?));
        if !cursor.more(b']')? {
            return Some(items);
        }
    }
}

/// The items of the array `text` and, for each that is an object, its fields, in one scan
/// that hands `each` every item as it is split: its range of `text`, the range of `fields`
/// its fields were appended to (empty for an item that is not an object), and `fields`.
/// The scan ends where `each` breaks, leaving the rest unread; `None` when `text` is not an
/// array up to there.
pub(super) fn items_and_fields(
    text: &[u8],
    fields: &mut Vec<FieldRange>,
    mut each: impl FnMut(Range<usize>, Range<usize>, &[FieldRange]) -> ControlFlow<()>,
) -> Option<()> {
    let mut cursor = Cursor::new(text, 0);
    if cursor.open(b'[', b']')? {
        return Some(());
    }
    loop {
        cursor.space();
        let first = fields.len();
        let item = if text.get(cursor.at) == Some(&b'{') {
            cursor.fields(|key, value| fields.push((key, value)))?
        } else {
            cursor.value()?
        };
        if each(item, first..fields.len(), fields).is_break() || !cursor.more(b']')? {
            return Some(());
        }
    }
}

/// Appends the fields of the object at `raw` in `bytes` to `fields`; `None` when it is not
/// one object.
pub(super) fn object_fields(
    bytes: &[u8],
    raw: Range<usize>,
    fields: &mut Vec<FieldRange>,
) -> Option<()> {
    let mut cursor = Cursor::new(bytes.get(..raw.end)?, raw.start);
    cursor.space();
    cursor.fields(|key, value| fields.push((key, value)))?;
    cursor.end()
}

/// Whether `bytes` begin (after spaces) as a JSON object.
pub(super) fn opens_object(bytes: &[u8]) -> bool {
    let mut cursor = Cursor::new(bytes, 0);
    cursor.space();
    cursor.eat(b'{').is_some()
}

/// The splitting steps, on the JSON scan's cursor.
trait Split {
    /// Reads the object at the cursor (after spaces): its entries and its range.
    fn object<N: Build>(&mut self) -> Option<(Entries<N>, Range<usize>)>;
    /// Reads a top-level entry: its key and its value, split into its entries if it is an
    /// object (filters read `metadata.name`, `spec.type`, not a top-level object whole).
    fn top_level_entry<N: Build>(&mut self) -> Option<(Key, N)>;
    /// Reads the object at the cursor, handing `field` each field's key and value range;
    /// its range.
    fn fields(&mut self, field: impl FnMut(Key, Range<usize>)) -> Option<Range<usize>>;
    /// Reads an entry's key (unescaped if it holds an escape) and the colon after it,
    /// leaving the cursor at its value.
    fn entry(&mut self) -> Option<Key>;
}

impl Split for Cursor<'_> {
    fn object<N: Build>(&mut self) -> Option<(Entries<N>, Range<usize>)> {
        self.space();
        let mut entries = Vec::with_capacity(8);
        let raw = self.fields(|key, value| entries.push((key, N::value(value))))?;
        Some((entries, raw))
    }

    fn top_level_entry<N: Build>(&mut self) -> Option<(Key, N)> {
        let key = self.entry()?;
        let node = if self.bytes.get(self.at) == Some(&b'{') {
            let (children, raw) = self.object()?;
            N::object(raw, children)
        } else {
            N::value(self.value()?)
        };
        Some((key, node))
    }

    fn fields(&mut self, mut field: impl FnMut(Key, Range<usize>)) -> Option<Range<usize>> {
        let start = self.at;
        if self.open(b'{', b'}')? {
            return Some(start..self.at);
        }
        loop {
            let key = self.entry()?;
            field(key, self.value()?);
            if !self.more(b'}')? {
                return Some(start..self.at);
            }
        }
    }

    fn entry(&mut self) -> Option<Key> {
        let key = self.entry_key()?;
        if !key.escaped {
            return Some(Key::Raw(key.raw));
        }
        let quoted = key.raw.start - 1..key.raw.end + 1;
        serde_json::from_slice(&self.bytes[quoted])
            .ok()
            .map(Key::Owned)
    }
}

#[cfg(test)]
mod tests;
