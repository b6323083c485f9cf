//! Finding the bracket that closes a JSON object, across chunk boundaries, eight bytes at a
//! time, and cutting the object out of the framing buffer: each word's quotes, brackets and
//! backslashes are found as bit masks, a prefix XOR of the quotes says which bytes lie inside
//! strings, and only the brackets outside them are visited. A word holding a backslash (an
//! escape) is read byte by byte.

use bytes::{Buf, Bytes, BytesMut};

use super::FrameError;

/// A byte repeated in every lane of a word.
const fn lanes(byte: u8) -> u64 {
    u64::from_ne_bytes([byte; 8])
}

/// The high bit of every lane.
const HIGH: u64 = lanes(0x80);

/// `0x80` in each byte of `word` that is zero, and nothing else (no borrow between lanes).
#[inline]
fn zero_lanes(word: u64) -> u64 {
    let low7 = lanes(0x7f);
    !(((word & low7) + low7) | word | low7)
}

/// Where the scan of an object is, carried from one chunk to the next.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Nesting {
    /// Index of the object's opening brace in the framing buffer.
    start: usize,
    /// Brackets open, the object's own brace included; zero outside an object.
    depth: u32,
    /// Inside a string.
    inside: bool,
    /// Inside a string, just after a backslash: the next byte is escaped.
    escape: bool,
}

impl Nesting {
    /// Whether the scan is inside an object (its closing brace not yet found).
    pub fn within(&self) -> bool {
        self.depth > 0
    }

    /// The object's opening brace was read, at `start`.
    pub fn enter(&mut self, start: usize) {
        *self = Nesting {
            start,
            depth: 1,
            ..Nesting::default()
        };
    }

    /// Cuts the object, whose closing bracket [`Nesting::close`] found at `close`, out of
    /// `buf` with the bytes before it; a `]` there is malformed.
    pub fn cut(&self, buf: &mut BytesMut, close: usize) -> Result<Bytes, FrameError> {
        if buf[close] != b'}' {
            return Err(FrameError::Malformed);
        }
        buf.advance(self.start);
        Ok(buf.split_to(close + 1 - self.start).freeze())
    }

    /// Scans `buf` from `from` (inside the object) for the bracket that closes it: its index,
    /// or `None` when the buffer ends first. The bracket may be a `]`, which the caller
    /// rejects; either way the scan is then outside the object.
    pub fn close(&mut self, buf: &[u8], mut from: usize) -> Option<usize> {
        while let Some(word) = buf.get(from..from + 8) {
            let word = u64::from_le_bytes(word.try_into().expect("an 8-byte slice"));
            if self.escape || zero_lanes(word ^ lanes(b'\\')) != 0 {
                if let Some(at) = self.close_bytes(&buf[..from + 8], from) {
                    return Some(at);
                }
                from += 8;
                continue;
            }
            let quotes = zero_lanes(word ^ lanes(b'"'));
            // Each lane's high bit becomes the parity of the quotes up to and including it.
            let mut inside = quotes ^ (quotes << 8);
            inside ^= inside << 16;
            inside ^= inside << 32;
            if self.inside {
                inside ^= HIGH;
            }
            // `[` and `]` differ from `{` and `}` in bit 5 alone, and no other byte folds onto them.
            let folded = word | lanes(0x20);
            let opens = zero_lanes(folded ^ lanes(b'{'));
            let mut brackets = (opens | zero_lanes(folded ^ lanes(b'}'))) & !inside;
            while brackets != 0 {
                let lowest = brackets & brackets.wrapping_neg();
                if opens & lowest != 0 {
                    self.depth += 1;
                } else {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.inside = false;
                        return Some(from + brackets.trailing_zeros() as usize / 8);
                    }
                }
                brackets ^= lowest;
            }
            self.inside = inside >> 63 != 0;
            from += 8;
        }
        self.close_bytes(buf, from)
    }

    /// [`Nesting::close`] one byte at a time: for escapes and for the last bytes of a buffer.
    fn close_bytes(&mut self, buf: &[u8], from: usize) -> Option<usize> {
        for (at, &byte) in buf.iter().enumerate().skip(from) {
            if self.escape {
                self.escape = false;
            } else if self.inside {
                match byte {
                    b'\\' => self.escape = true,
                    b'"' => self.inside = false,
                    _ => {}
                }
            } else {
                match byte {
                    b'"' => self.inside = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => {
                        self.depth -= 1;
                        if self.depth == 0 {
                            return Some(at);
                        }
                    }
                    _ => {}
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scan one byte at a time over the whole input: what the word scan must agree with.
    fn reference(body: &[u8]) -> (Option<usize>, Nesting) {
        let mut nesting = Nesting::default();
        nesting.enter(0);
        (nesting.close_bytes(body, 0), nesting)
    }

    /// The word scan over `body` pushed in pieces of `chunk` bytes.
    fn in_chunks(body: &[u8], chunk: usize) -> (Option<usize>, Nesting) {
        let mut nesting = Nesting::default();
        nesting.enter(0);
        let mut from = 0;
        for end in (chunk..body.len()).step_by(chunk).chain([body.len()]) {
            if let Some(at) = nesting.close(&body[..end], from) {
                return (Some(at), nesting);
            }
            from = end;
        }
        (None, nesting)
    }

    #[test]
    fn agrees_with_the_byte_scan_on_random_bodies_in_any_chunks() {
        let alphabet = b"{}[]\"\\a :,";
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let len = rng.usize(..48);
            let body: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.usize(..alphabet.len())])
                .collect();
            let want = reference(&body);
            for chunk in [1, 3, 7, 8, 9, 16, 48] {
                let got = in_chunks(&body, chunk);
                assert_eq!(
                    got.0,
                    want.0,
                    "{:?} chunk {chunk}",
                    String::from_utf8_lossy(&body)
                );
                if want.0.is_none() {
                    assert_eq!(got.1, want.1, "{:?}", String::from_utf8_lossy(&body));
                }
            }
        }
    }

    #[test]
    fn skips_brackets_in_strings_and_escaped_quotes() {
        let body = br#""a}]\"}" : {"k":[1,"]"]}, "x\\" } tail"#;
        let close = body.iter().rposition(|&b| b == b'}').unwrap();
        for chunk in 1..=body.len() {
            assert_eq!(in_chunks(body, chunk).0, Some(close), "chunk {chunk}");
        }
        // Every byte value in every lane of a word, inside and outside a string.
        for byte in 0..=255u8 {
            for lane in 0..8 {
                for prefix in [&b""[..], b"\""] {
                    let mut body = prefix.to_vec();
                    body.extend_from_slice(b"aaaaaaaa");
                    let at = prefix.len() + lane;
                    body[at] = byte;
                    body.extend_from_slice(b"\"}}}}}}}}aaaaaaaaaaaaaaaa");
                    assert_eq!(in_chunks(&body, 64), reference(&body), "{byte:#x} at {at}");
                }
            }
        }
    }

    #[test]
    fn an_object_cut_short_stays_open() {
        let mut nesting = Nesting::default();
        nesting.enter(0);
        assert_eq!(nesting.close(br#"{"a":"}"#, 0), None);
        assert!(nesting.within());
        assert_eq!(nesting.close(br#"{"a":"}"}}"#, 7), Some(9));
        assert!(!nesting.within());
    }
}
