//! Skipping the inside of a JSON string across chunk boundaries (`edgegate_json_scan`: 32
//! bytes at a time, escapes included): how the list framer reads the head before the items.

use edgegate_json_scan::string_end;

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
        match string_end(buf, from) {
            Some((at, _)) => {
                self.inside = false;
                Skipped::Closed(at)
            }
            None => {
                // A run of backslashes at the end escapes the next chunk's first byte when it is odd.
                let rest = buf.get(from..).unwrap_or_default();
                let run = rest.iter().rev().take_while(|&&byte| byte == b'\\').count();
                self.escape_pending = run % 2 == 1;
                Skipped::Open
            }
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

    #[test]
    fn a_string_ends_at_the_same_quote_however_it_is_split() {
        // Runs of one, five and six backslashes before quotes, split at every byte.
        let text = br#"a\"b\\\\\"c\\\\\\"x"#;
        let whole = {
            let mut s = Strings::default();
            s.open();
            s.skip(text, 0)
        };
        assert_eq!(whole, Skipped::Closed(17));
        for cut in 0..text.len() {
            let mut s = Strings::default();
            s.open();
            let got = match s.skip(&text[..cut], 0) {
                Skipped::Open => s.skip(text, cut),
                closed => closed,
            };
            assert_eq!(got, whole, "cut at {cut}");
        }
    }
}
