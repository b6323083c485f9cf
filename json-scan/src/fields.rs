//! Finding a few fields of an object's JSON text without reading the rest: for a host that
//! needs one field of bytes it has checked already ([`field_range`], [`field_ranges`]), or
//! that checks only what a filter changed ([`kept_fields`]). Values are skipped, not
//! checked.

use std::ops::Range;

use crate::cursor::Cursor;

/// What [`first_at`] finds at a path.
#[derive(Debug, PartialEq, Eq)]
pub enum Peek {
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
/// twice this finds the first, where a parser keeps the last.
#[inline]
pub fn first_at(bytes: &[u8], path: &[&str]) -> Peek {
    let mut cursor = Cursor::new(bytes, 0);
    for key in path {
        match cursor.first_entry(key) {
            Some(true) => {}
            Some(false) => return Peek::Missing,
            None => return Peek::Unreadable,
        }
    }
    cursor.value().map_or(Peek::Unreadable, Peek::Found)
}

/// Where the value of top-level field `key` lies in an object's JSON bytes, found by
/// skipping the fields before it without reading or checking them. `None` when there is no
/// such field or the bytes are not an object.
pub fn field_range(bytes: &[u8], key: &str) -> Option<Range<usize>> {
    match first_at(bytes, &[key]) {
        Peek::Found(value) => Some(value),
        Peek::Missing | Peek::Unreadable => None,
    }
}

/// Where the values of the fields `keys` of the object at `path` (`["metadata"]`) lie in an
/// object's JSON bytes, found by reading each object on the way only as far as the path's
/// key, then the object at its end as far as the last of `keys`, skipping values without
/// reading or checking them. A key the object lacks is `None`, and all are when nothing is
/// at `path`; `None` when the bytes do not read as objects up to there, or give one of
/// `keys` twice before the last of them.
pub fn field_ranges<const N: usize>(
    bytes: &[u8],
    path: &[&str],
    keys: [&str; N],
) -> Option<[Option<Range<usize>>; N]> {
    let mut cursor = Cursor::new(bytes, 0);
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

/// The top-level fields a filter's replacement keeps from its original, as [`kept_fields`]
/// finds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptFields {
    /// Where the kept fields' keys (JSON text, quotes included) lie in the replacement.
    pub keys: Vec<Range<usize>>,
    /// Where the replacement goes on: just after the last kept field's value, or after its
    /// opening brace when none is kept.
    pub rest: usize,
    /// How many bytes the replacement begins with as the original does.
    pub same: usize,
}

/// The top-level fields a filter's replacement keeps from `original` in place: those that,
/// with the byte after them, lie before the first byte where the two differ, so the
/// original's scan reads them as the replacement's would. Found by a scan that finds where
/// values end without checking them, and that stops at the first byte that differs: for a
/// host that checks only what a filter changed, reading the rest of the replacement from
/// [`KeptFields::rest`]. `None` when `replacement` does not begin as an object.
pub fn kept_fields(original: &[u8], replacement: &[u8]) -> Option<KeptFields> {
    let same = common_start(original, replacement);
    let mut cursor = Cursor::new(replacement, 0);
    cursor.space();
    cursor.eat(b'{')?;
    // From here on the scan sees only the common start.
    cursor.bytes = replacement.get(..same).unwrap_or(replacement);
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
    Some(KeptFields { keys, rest, same })
}

/// How many bytes `a` and `b` start with in common; 16 at a time while they agree.
fn common_start(a: &[u8], b: &[u8]) -> usize {
    let (a_blocks, _) = a.as_chunks::<16>();
    let (b_blocks, _) = b.as_chunks::<16>();
    let blocks = a_blocks
        .iter()
        .zip(b_blocks)
        .take_while(|(a, b)| a == b)
        .count();
    let from = blocks * 16;
    from + a[from..]
        .iter()
        .zip(&b[from..])
        .take_while(|(a, b)| a == b)
        .count()
}

#[cfg(test)]
mod tests;
