//! What the split and the nodes share: an entry's key, a field's range, and how the split
//! builds the values it finds ([`Build`]), so that it need not know [`super::node::Node`].

use std::ops::Range;

/// An entry's key: its range of the bytes when it holds no escape, else its unescaped text.
#[derive(Clone, Debug)]
pub(super) enum Key {
    /// The key's text lies here in the object's bytes (quotes excluded).
    Raw(Range<usize>),
    /// The key, unescaped.
    Owned(String),
}

impl Key {
    /// Whether this is `key`.
    pub(super) fn is(&self, bytes: &[u8], key: &str) -> bool {
        match self {
            Key::Raw(raw) => bytes.get(raw.clone()) == Some(key.as_bytes()),
            Key::Owned(owned) => owned == key,
        }
    }

    /// The key's text; `None` when the bytes are not UTF-8.
    pub(super) fn text<'a>(&'a self, bytes: &'a [u8]) -> Option<&'a str> {
        match self {
            Key::Raw(raw) => std::str::from_utf8(bytes.get(raw.clone())?).ok(),
            Key::Owned(owned) => Some(owned),
        }
    }
}

/// A top-level field of an item: its key and the range of its value in the item's bytes.
pub(super) type FieldRange = (Key, Range<usize>);

/// An object's entries as the split builds them.
pub(super) type Entries<N> = Vec<(Key, N)>;

/// What the split builds of each value it finds.
pub(super) trait Build: Sized {
    /// A value lying at `raw`, not split.
    fn value(raw: Range<usize>) -> Self;
    /// An object lying at `raw`, whose entries were split already.
    fn object(raw: Range<usize>, entries: Entries<Self>) -> Self;
}
