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

use edgegate_json_scan::{Brackets, string_end};
use serde_json::Value;

use super::item::FieldRange;
use super::node::{Entry, Key, Node};

/// The entries of the JSON object `bytes` up to and including `metadata` (already split into
/// its own), and where the entries after it begin: `None` when the object ended first, its
/// end checked to be the end of the bytes. `None` when the bytes do not begin as one object.
pub(super) fn head(bytes: &[u8]) -> Option<(Vec<Entry>, Option<usize>)> {
    let mut cursor = Cursor { bytes, at: 0 };
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
pub(super) fn rest(bytes: &[u8], at: usize) -> Option<Vec<Entry>> {
    let mut cursor = Cursor { bytes, at };
    let mut entries = Vec::new();
    while cursor.more(b'}')? {
        entries.push(cursor.top_level_entry()?);
    }
    cursor.end().map(|()| entries)
}

/// The entries of the value at `raw` in `bytes`; `None` when it is not an object.
pub(super) fn entries(bytes: &[u8], raw: Range<usize>) -> Option<Vec<Entry>> {
    let mut cursor = Cursor {
        bytes: bytes.get(..raw.end)?,
        at: raw.start,
    };
    cursor.object().map(|(entries, _)| entries)
}

/// The items of the array at `raw` in `bytes`; `None` when it is not an array.
pub(super) fn items(bytes: &[u8], raw: Range<usize>) -> Option<Vec<Node>> {
    let mut cursor = Cursor {
        bytes: bytes.get(..raw.end)?,
        at: raw.start,
    };
    let mut items = Vec::new();
    if cursor.open(b'[', b']')? {
        return Some(items);
    }
    loop {
        cursor.space();
        items.push(Node::new(cursor.value()?));
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
    let mut cursor = Cursor { bytes: text, at: 0 };
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
    let mut cursor = Cursor {
        bytes: bytes.get(..raw.end)?,
        at: raw.start,
    };
    cursor.space();
    cursor.fields(|key, value| fields.push((key, value)))?;
    cursor.end()
}

/// Where the value of the top-level field `key` lies in the JSON object `bytes`, found by
/// skipping the fields before it; `None` when it has no such field or is not an object.
pub(super) fn field_range(bytes: &[u8], key: &str) -> Option<Range<usize>> {
    match first_at(bytes, &[key]) {
        Peek::Found(value) => Some(value),
        Peek::Missing | Peek::Unreadable => None,
    }
}

/// Where the values of the fields `keys` of the object at `path` in the JSON object `bytes`
/// lie, read as [`first_at`] reads its way and then in one scan that ends where the last of
/// them is found; all `None` when there is nothing at `path`. `None` when the bytes do not
/// read as objects up to there, or give one of `keys` twice before then.
pub(super) fn field_ranges<const N: usize>(
    bytes: &[u8],
    path: &[&str],
    keys: [&str; N],
) -> Option<[Option<Range<usize>>; N]> {
    let mut cursor = Cursor { bytes, at: 0 };
    let mut found = [const { None }; N];
    for key in path {
        if !cursor.first_entry(key)? {
            return Some(found);
        }
    }
    if cursor.open(b'{', b'}')? {
        return Some(found);
    }
    let mut left = N;
    loop {
        let key = cursor.entry_key()?;
        let value = cursor.value()?;
        if let Some(i) = keys.iter().position(|wanted| key.is(bytes, wanted)) {
            if found[i].replace(value).is_some() {
                return None;
            }
            left -= 1;
            if left == 0 {
                return Some(found);
            }
        }
        if !cursor.more(b'}')? {
            return Some(found);
        }
    }
}

/// The keys of the top-level entries of the JSON object `bytes` that, with the byte after
/// each, lie before `same`, and where the object goes on after them (after its opening brace
/// when there are none); `None` when the bytes do not begin as an object. Nothing at or past
/// `same` is read but the opening brace.
pub(super) fn kept_entries(bytes: &[u8], same: usize) -> Option<(Vec<Range<usize>>, usize)> {
    let mut cursor = Cursor { bytes, at: 0 };
    cursor.space();
    cursor.eat(b'{')?;
    // From here on the scan sees only the common start.
    cursor.bytes = bytes.get(..same).unwrap_or(bytes);
    let mut rest = cursor.at;
    let mut keys = Vec::with_capacity(8);
    loop {
        cursor.space();
        let start = cursor.at;
        let Some(key) = cursor.string().map(|_| start..cursor.at) else {
            break;
        };
        cursor.space();
        if cursor.eat(b':').is_none() {
            break;
        }
        cursor.space();
        match cursor.value() {
            Some(value) if value.end < same => rest = value.end,
            _ => break,
        }
        keys.push(key);
        if cursor.more(b'}') != Some(true) {
            break;
        }
    }
    Some((keys, rest))
}

/// Whether `bytes` begin (after spaces) as a JSON object.
pub(super) fn opens_object(bytes: &[u8]) -> bool {
    let mut cursor = Cursor { bytes, at: 0 };
    cursor.space();
    cursor.eat(b'{').is_some()
}

/// What [`first_at`] finds at a path.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Peek {
    /// The value of the path lies here: each key's first entry.
    Found(Range<usize>),
    /// An object on the way holds no entry of the key.
    Missing,
    /// The text on the way does not read as objects.
    Unreadable,
}

/// Where the value at `path` lies in the JSON object `bytes`, found by reading each object
/// on the way only as far as the key's first entry, and nothing after it: reading
/// `metadata.name` reads the few entries before it, not `managedFields`. Where a key is given
/// twice this finds the first, where a split reads the last.
pub(super) fn first_at(bytes: &[u8], path: &[&str]) -> Peek {
    let mut cursor = Cursor { bytes, at: 0 };
    for key in path {
        match cursor.first_entry(key) {
            Some(true) => {}
            Some(false) => return Peek::Missing,
            None => return Peek::Unreadable,
        }
    }
    cursor.value().map_or(Peek::Unreadable, Peek::Found)
}

/// A value from its JSON text. What the split skipped is checked here: text that is not JSON
/// (or a lone surrogate escape) makes this panic, which in a filter traps the call so the
/// host applies the failure policy.
pub(super) fn parse(text: &[u8]) -> Value {
    match serde_json::from_slice(text) {
        Ok(value) => value,
        Err(error) => panic!("a field of the object does not parse: {error}"),
    }
}

/// A position in JSON text.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    /// Reads the object at the cursor (after spaces): its entries and its range.
    fn object(&mut self) -> Option<(Vec<Entry>, Range<usize>)> {
        self.space();
        let mut entries = Vec::with_capacity(8);
        let raw = self.fields(|key, value| entries.push((key, Node::new(value))))?;
        Some((entries, raw))
    }

    /// Reads the object at the cursor (after spaces) up to the first entry of `key`, leaving
    /// the cursor at its value: whether there is one, `false` once the object closed without.
    fn first_entry(&mut self, key: &str) -> Option<bool> {
        if self.open(b'{', b'}')? {
            return Some(false);
        }
        loop {
            if self.entry_key()?.is(self.bytes, key) {
                return Some(true);
            }
            self.value()?;
            if !self.more(b'}')? {
                return Some(false);
            }
        }
    }

    /// Reads a top-level entry: its key and its value, split into its entries if it is an
    /// object (filters read `metadata.name`, `spec.type`, not a top-level object whole).
    fn top_level_entry(&mut self) -> Option<Entry> {
        let key = self.entry_key()?;
        let node = if self.bytes.get(self.at) == Some(&b'{') {
            let (children, raw) = self.object()?;
            Node::split(raw, children)
        } else {
            Node::new(self.value()?)
        };
        Some((key, node))
    }

    /// Checks that only spaces follow.
    fn end(&mut self) -> Option<()> {
        self.space();
        (self.at == self.bytes.len()).then_some(())
    }

    /// Reads the object at the cursor, handing `field` each field's key and value range; its
    /// range.
    fn fields(&mut self, mut field: impl FnMut(Key, Range<usize>)) -> Option<Range<usize>> {
        let start = self.at;
        if self.open(b'{', b'}')? {
            return Some(start..self.at);
        }
        loop {
            let key = self.entry_key()?;
            field(key, self.value()?);
            if !self.more(b'}')? {
                return Some(start..self.at);
            }
        }
    }

    /// Opens an object or array (after spaces); whether it is empty, closing at once.
    fn open(&mut self, open: u8, close: u8) -> Option<bool> {
        self.space();
        self.eat(open)?;
        self.space();
        Some(self.eat(close).is_some())
    }

    /// Reads an entry's key and the colon after it, leaving the cursor at its value.
    fn entry_key(&mut self) -> Option<Key> {
        self.space();
        let key = self.key()?;
        self.space();
        self.eat(b':')?;
        self.space();
        Some(key)
    }

    /// After an item or entry: whether another follows, or `close` ended the container.
    fn more(&mut self, close: u8) -> Option<bool> {
        self.space();
        match self.next()? {
            b',' => Some(true),
            byte if byte == close => Some(false),
            _ => None,
        }
    }

    /// Reads a key: its range when it has no escapes, else its unescaped text.
    fn key(&mut self) -> Option<Key> {
        let start = self.at;
        let escaped = self.string()?;
        let raw = start + 1..self.at - 1;
        if !escaped {
            return Some(Key::Raw(raw));
        }
        serde_json::from_slice(&self.bytes[start..self.at])
            .ok()
            .map(Key::Owned)
    }

    /// Skips the value at the cursor and says where it lay.
    fn value(&mut self) -> Option<Range<usize>> {
        let start = self.at;
        match *self.bytes.get(start)? {
            b'"' => {
                self.string()?;
            }
            b'{' | b'[' => self.nested()?,
            _ => {
                let len = self.bytes[start..]
                    .iter()
                    .take_while(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                    .count();
                if len == 0 {
                    return None;
                }
                self.at += len;
            }
        }
        Some(start..self.at)
    }

    /// Skips an object or array (its opening bracket at the cursor), by its brackets.
    fn nested(&mut self) -> Option<()> {
        self.at = Brackets::opened().close(self.bytes, self.at + 1)? + 1;
        Some(())
    }

    /// Skips the string at the cursor (its opening quote), through its closing quote; whether
    /// it held an escape.
    fn string(&mut self) -> Option<bool> {
        self.eat(b'"')?;
        let (end, escaped) = string_end(self.bytes, self.at)?;
        self.at = end + 1;
        Some(escaped)
    }

    fn space(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    fn next(&mut self) -> Option<u8> {
        let byte = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(byte)
    }
}

#[cfg(test)]
mod tests;
