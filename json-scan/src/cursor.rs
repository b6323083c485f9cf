//! [`Cursor`]: a position in JSON text that steps over keys and values without reading
//! them, finding where each ends with the block scans: what the filter SDK splits objects
//! with, and what the gateway reads a few fields of an object with.

use std::ops::Range;

use crate::{Brackets, string_end};

/// A position in JSON text. Its steps answer `None` where the text does not read as JSON
/// up to where they look; values are skipped, not checked.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    /// The text.
    pub bytes: &'a [u8],
    /// Where the next step reads.
    pub at: usize,
}

/// An object's key as read by [`Cursor::key`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    /// The key's text in the bytes, quotes excluded.
    pub raw: Range<usize>,
    /// Whether the text holds an escape (it is then not the key as it stands).
    pub escaped: bool,
}

impl Key {
    /// Whether this is `key`, unescaping the text if it holds an escape.
    #[inline]
    pub fn is(&self, bytes: &[u8], key: &str) -> bool {
        let Some(text) = bytes.get(self.raw.clone()) else {
            return false;
        };
        match self.escaped {
            false => text == key.as_bytes(),
            true => unescape(text).as_deref() == Some(key),
        }
    }
}

impl<'a> Cursor<'a> {
    /// A cursor at `at` in `bytes`.
    #[inline]
    pub fn new(bytes: &'a [u8], at: usize) -> Cursor<'a> {
        Cursor { bytes, at }
    }

    /// Reads the object at the cursor (after spaces) up to the first entry of `key`, leaving
    /// the cursor at its value: whether there is one, `false` once the object closed without.
    #[inline]
    pub fn first_entry(&mut self, key: &str) -> Option<bool> {
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

    /// Checks that only spaces follow.
    pub fn end(&mut self) -> Option<()> {
        self.space();
        (self.at == self.bytes.len()).then_some(())
    }

    /// Opens an object or array (after spaces); whether it is empty, closing at once.
    #[inline]
    pub fn open(&mut self, open: u8, close: u8) -> Option<bool> {
        self.space();
        self.eat(open)?;
        self.space();
        Some(self.eat(close).is_some())
    }

    /// Reads an entry's key and the colon after it, leaving the cursor at its value.
    #[inline]
    pub fn entry_key(&mut self) -> Option<Key> {
        self.space();
        let key = self.key()?;
        self.space();
        self.eat(b':')?;
        self.space();
        Some(key)
    }

    /// After an item or entry: whether another follows, or `close` ended the container.
    #[inline]
    pub fn more(&mut self, close: u8) -> Option<bool> {
        self.space();
        match self.take()? {
            b',' => Some(true),
            byte if byte == close => Some(false),
            _ => None,
        }
    }

    /// Reads a key (the string at the cursor).
    #[inline]
    pub fn key(&mut self) -> Option<Key> {
        let start = self.at;
        let escaped = self.string()?;
        Some(Key {
            raw: start + 1..self.at - 1,
            escaped,
        })
    }

    /// Skips the value at the cursor and says where it lay.
    #[inline]
    pub fn value(&mut self) -> Option<Range<usize>> {
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
    #[inline]
    pub fn nested(&mut self) -> Option<()> {
        self.at = Brackets::opened().close(self.bytes, self.at + 1)? + 1;
        Some(())
    }

    /// Skips the string at the cursor (its opening quote), through its closing quote; whether
    /// it held an escape.
    #[inline]
    pub fn string(&mut self) -> Option<bool> {
        self.eat(b'"')?;
        let (end, escaped) = string_end(self.bytes, self.at)?;
        self.at = end + 1;
        Some(escaped)
    }

    /// Skips spaces.
    #[inline]
    pub fn space(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    /// Steps over `byte` if it is next.
    #[inline]
    pub fn eat(&mut self, byte: u8) -> Option<()> {
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// Steps over the next byte, giving it.
    #[inline]
    pub fn take(&mut self) -> Option<u8> {
        let byte = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(byte)
    }
}

/// The text of a JSON string's contents (quotes excluded); `None` when an escape is not
/// JSON's or the result is not UTF-8.
fn unescape(text: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.iter().copied();
    while let Some(byte) = bytes.next() {
        if byte != b'\\' {
            out.push(byte);
            continue;
        }
        let unit = match bytes.next()? {
            b'u' => hex4(&mut bytes)?,
            escape => {
                out.push(match escape {
                    b'"' | b'\\' | b'/' => escape,
                    b'b' => 8,
                    b'f' => 12,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    _ => return None,
                });
                continue;
            }
        };
        let code = match unit {
            0xd800..=0xdbff => {
                let (b'\\', b'u') = (bytes.next()?, bytes.next()?) else {
                    return None;
                };
                let low = hex4(&mut bytes)?;
                if !(0xdc00..=0xdfff).contains(&low) {
                    return None;
                }
                0x10000 + ((u32::from(unit) - 0xd800) << 10) + (u32::from(low) - 0xdc00)
            }
            _ => u32::from(unit),
        };
        let mut buffer = [0; 4];
        out.extend_from_slice(char::from_u32(code)?.encode_utf8(&mut buffer).as_bytes());
    }
    String::from_utf8(out).ok()
}

/// Four hex digits of a `\u` escape.
fn hex4(bytes: &mut impl Iterator<Item = u8>) -> Option<u16> {
    (0..4).try_fold(0u16, |unit, _| {
        let digit = char::from(bytes.next()?).to_digit(16)?;
        Some(unit << 4 | digit as u16)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_keys_compare_unescaped() {
        let text = br#"{"a\u00e9\"\ud83d\ude00": 1, "plain": [1, {"x": "}"}], "z": 2}"#;
        let mut cursor = Cursor::new(text, 0);
        assert_eq!(cursor.first_entry("a\u{e9}\"\u{1f600}"), Some(true));
        assert_eq!(cursor.value().map(|raw| &text[raw]), Some(&b"1"[..]));
        let mut cursor = Cursor::new(text, 0);
        assert_eq!(cursor.first_entry("z"), Some(true));
        assert_eq!(cursor.value().map(|raw| &text[raw]), Some(&b"2"[..]));
        assert_eq!(Cursor::new(text, 0).first_entry("y"), Some(false));
        assert_eq!(Cursor::new(b"[1]", 0).first_entry("y"), None);
        assert_eq!(unescape(br"\ud800"), None);
        assert_eq!(unescape(br"\q"), None);
    }
}
