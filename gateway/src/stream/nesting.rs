//! Finding the bracket that closes a JSON object, across chunk boundaries, 32 bytes at a
//! time, and cutting the object out of the framing buffer: each block's quotes, brackets
//! and backslashes are found by SIMD compares (SSE2 on x86-64, NEON on aarch64, through
//! `wide`) as bit masks, a prefix XOR of the quotes says which bytes lie inside strings, and
//! only the brackets outside them are visited. Escapes are found from the backslash mask,
//! so escaped strings stay on the fast path; a block with a backslash outside a string (not
//! JSON) is read byte by byte.

use bytes::{Buf, Bytes, BytesMut};
use wide::u8x16;

use super::FrameError;

/// Bytes scanned at once: two 16-byte vectors, one bit of a `u32` mask each.
const BLOCK: usize = 32;

/// The bytes of `block` equal to `byte`, one bit each (bit `i` for byte `i`).
#[inline]
fn mask_of(block: [u8x16; 2], byte: u8) -> u32 {
    let byte = u8x16::splat(byte);
    block[0].simd_eq(byte).to_bitmask() | block[1].simd_eq(byte).to_bitmask() << 16
}

/// The 32 bytes of `buf` at `from` as two vectors, if there are 32.
#[inline]
fn block_at(buf: &[u8], from: usize) -> Option<[u8x16; 2]> {
    let block = buf.get(from..from + BLOCK)?;
    let half = |at: usize| u8x16::new(block[at..at + 16].try_into().expect("16 bytes"));
    Some([half(0), half(16)])
}

/// The backslashes of a block that escape the byte after them, and the bytes they escape.
#[derive(Debug, Clone, Copy)]
struct Escaped {
    /// Backslashes that are not themselves escaped.
    backslashes: u32,
    /// Bytes escaped, one bit each.
    bytes: u32,
    /// Whether the next block's first byte is escaped.
    next: bool,
}

/// [`Escaped`] of a block whose backslashes are `backslashes`, its first byte escaped by
/// the block before when `first_escaped`. A run of backslashes escapes the byte after it
/// when it is of odd length: adding a run's first bit to the mask carries through the run
/// to the byte after it, and that byte lies an odd distance from the start exactly then,
/// on an odd bit for a run starting on an even one and the other way round. A run reaching
/// the block's end carries into bit 32: the next block's first byte.
#[inline]
fn escaped(backslashes: u32, first_escaped: bool) -> Escaped {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    if backslashes == 0 && !first_escaped {
        return Escaped {
            backslashes,
            bytes: 0,
            next: false,
        };
    }
    let first = u32::from(first_escaped);
    let backslashes = backslashes & !first;
    let starts = u64::from(backslashes & !(backslashes << 1));
    let runs = u64::from(backslashes);
    let after_even = (runs + (starts & EVEN)) & !runs & !EVEN;
    let after_odd = (runs + (starts & !EVEN)) & !runs & EVEN;
    let bytes = after_even | after_odd;
    Escaped {
        backslashes,
        bytes: bytes as u32 | first,
        next: bytes >> 32 != 0,
    }
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
        while let Some(block) = block_at(buf, from) {
            let escaped = escaped(mask_of(block, b'\\'), self.escape);
            let quotes = mask_of(block, b'"') & !escaped.bytes;
            // Each bit becomes the parity of the quotes up to and including its byte.
            let mut inside = quotes ^ (quotes << 1);
            inside ^= inside << 2;
            inside ^= inside << 4;
            inside ^= inside << 8;
            inside ^= inside << 16;
            if self.inside {
                inside = !inside;
            }
            // A backslash outside a string (not JSON) escapes nothing there: the byte scan's
            // reading of it is the one kept.
            if escaped.backslashes & !inside != 0 {
                if let Some(at) = self.close_bytes(&buf[..from + BLOCK], from) {
                    return Some(at);
                }
                from += BLOCK;
                continue;
            }
            // `[` and `]` differ from `{` and `}` in bit 5 alone, and no other byte folds onto them.
            let lower = u8x16::splat(0x20);
            let folded = [block[0] | lower, block[1] | lower];
            let opens = mask_of(folded, b'{');
            let mut brackets = (opens | mask_of(folded, b'}')) & !inside;
            while brackets != 0 {
                let lowest = brackets & brackets.wrapping_neg();
                if opens & lowest != 0 {
                    self.depth += 1;
                } else {
                    self.depth -= 1;
                    if self.depth == 0 {
                        (self.inside, self.escape) = (false, false);
                        return Some(from + brackets.trailing_zeros() as usize);
                    }
                }
                brackets ^= lowest;
            }
            self.inside = inside >> 31 != 0;
            self.escape = escaped.next;
            from += BLOCK;
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

    /// The scan one byte at a time over the whole input: what the block scan must agree with.
    fn reference(body: &[u8]) -> (Option<usize>, Nesting) {
        let mut nesting = Nesting::default();
        nesting.enter(0);
        (nesting.close_bytes(body, 0), nesting)
    }

    /// The block scan over `body` pushed in pieces of `chunk` bytes.
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

    /// The block scan over `body` in pieces of each of `chunks` bytes finds what the byte scan
    /// finds, and ends in the same state when the object does not close.
    fn agrees_in_chunks(body: &[u8], chunks: &[usize]) {
        let want = reference(body);
        for &chunk in chunks {
            let got = in_chunks(body, chunk);
            let text = String::from_utf8_lossy(body);
            assert_eq!(got.0, want.0, "{text:?} chunk {chunk}");
            if want.0.is_none() {
                assert_eq!(got.1, want.1, "{text:?}");
            }
        }
    }

    #[test]
    fn agrees_with_the_byte_scan_on_random_bodies_in_any_chunks() {
        let alphabet = b"{}[]\"\\a :,";
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let len = rng.usize(..160);
            let body: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.usize(..alphabet.len())])
                .collect();
            agrees_in_chunks(&body, &[1, 3, 7, 8, 9, 16, 31, 32, 33, 48, 100, 160]);
        }
    }

    #[test]
    fn agrees_with_the_byte_scan_on_random_json_with_escapes_in_strings() {
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        for _ in 0..20_000 {
            let mut body = Vec::new();
            while body.len() < rng.usize(..200) {
                match rng.u8(..6) {
                    0 => body.push(b"{}[]:,a "[rng.usize(..8)]),
                    _ => {
                        // A string whose text holds quotes, backslashes and brackets, escaped.
                        body.push(b'"');
                        for _ in 0..rng.usize(..12) {
                            match b"a{}[]\\\"n"[rng.usize(..8)] {
                                b'n' => body.extend_from_slice(b"\\n"),
                                byte @ (b'\\' | b'"') => body.extend_from_slice(&[b'\\', byte]),
                                byte => body.push(byte),
                            }
                        }
                        body.push(b'"');
                    }
                }
            }
            agrees_in_chunks(&body, &[1, 5, 31, 32, 33, 64, 200]);
        }
    }

    #[test]
    fn skips_brackets_in_strings_and_escaped_quotes() {
        let body = br#""a}]\"}" : {"k":[1,"]"]}, "x\\" } tail"#;
        let close = body.iter().rposition(|&b| b == b'}').unwrap();
        for chunk in 1..=body.len() {
            assert_eq!(in_chunks(body, chunk).0, Some(close), "chunk {chunk}");
        }
        // Every byte value in every byte of a block, inside and outside a string.
        for byte in 0..=255u8 {
            for lane in 0..BLOCK {
                for prefix in [&b""[..], b"\""] {
                    let mut body = prefix.to_vec();
                    body.extend_from_slice(&[b'a'; BLOCK]);
                    let at = prefix.len() + lane;
                    body[at] = byte;
                    body.push(b'"');
                    body.extend_from_slice(&[b'}'; BLOCK]);
                    body.extend_from_slice(&[b'a'; 2 * BLOCK]);
                    assert_eq!(in_chunks(&body, 256), reference(&body), "{byte:#x} at {at}");
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
