//! Skipping the inside of a JSON string quickly (`memchr` to the next quote or backslash),
//! across chunk boundaries: how the list framer reads the head before the items.

use memchr::memchr2;

/// Whether a scan is inside a string, carried from one chunk to the next.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Strings {
    inside: bool,
    /// A backslash ended the last chunk inside a string: the next byte is escaped.
    escape_pending: bool,
}

/// Where skipping a string got to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// The string closed at this index (of its closing quote).
    Closed(usize),
    /// The buffer ended inside the string.
    Open,
}

impl Strings {
    /// Whether the scan is inside a string.
    pub fn inside(&self) -> bool {
        self.inside
    }

    /// The scan met an opening quote.
    pub fn open(&mut self) {
        self.inside = true;
    }

    /// Skips string content in `buf` from `from` (inside a string) to its closing quote.
    pub fn skip(&mut self, buf: &[u8], mut from: usize) -> Skipped {
        if self.escape_pending {
            self.escape_pending = false;
            from += 1;
        }
        loop {
            let Some(offset) = buf.get(from..).and_then(|rest| memchr2(b'"', b'\\', rest)) else {
                return Skipped::Open;
            };
            let at = from + offset;
            if buf[at] == b'"' {
                self.inside = false;
                return Skipped::Closed(at);
            }
            if at + 1 >= buf.len() {
                self.escape_pending = true;
                return Skipped::Open;
            }
            from = at + 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_escapes_even_across_chunks() {
        let mut s = Strings::default();
        s.open();
        assert_eq!(s.skip(br#"ab\"cd"x"#, 0), Skipped::Closed(6));
        assert!(!s.inside());
        s.open();
        assert_eq!(s.skip(br"ab\", 0), Skipped::Open);
        // The escaped quote starts the next chunk.
        assert_eq!(s.skip(br#""c"y"#, 0), Skipped::Closed(2));
        s.open();
        assert_eq!(s.skip(b"no end", 0), Skipped::Open);
        assert!(s.inside());
    }
}
