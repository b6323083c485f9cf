//! Finding where a JSON string ends: the first quote of a block that no backslash escapes.
//! A block without a backslash costs two compares; one with backslashes, the carry
//! arithmetic of [`block::escaped`], so a string full of escapes (`last-applied-configuration`
//! is JSON inside a string) is still read a block at a time, not stopped at every escape.

use crate::block;

/// Where the string whose text begins at `from` (after its opening quote) ends: the index of
/// its closing quote, and whether its text holds an escape; `None` when it does not end.
#[inline]
pub fn string_end(text: &[u8], mut from: usize) -> Option<(usize, bool)> {
    let (mut escape, mut any) = (false, false);
    while let Some((block, len)) = block::load(text, from) {
        let backslashes = block.eq(b'\\');
        let mut quotes = block.eq(b'"');
        if backslashes != 0 || escape {
            let (_, escaped) = block::escaped(backslashes, escape);
            quotes &= !(escaped as u32);
            escape = escaped >> len & 1 != 0;
        }
        if quotes != 0 {
            let end = quotes.trailing_zeros();
            // Any backslash before the closing quote is part of an escape.
            any |= backslashes & ((1 << end) - 1) != 0;
            return Some((from + end as usize, any));
        }
        any |= backslashes != 0;
        from += len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end of a string, a byte at a time.
    fn reference(bytes: &[u8], from: usize) -> Option<(usize, bool)> {
        let (mut escape, mut any) = (false, false);
        for (at, &byte) in bytes.iter().enumerate().skip(from) {
            if escape {
                escape = false;
            } else if byte == b'"' {
                return Some((at, any));
            } else if byte == b'\\' {
                (escape, any) = (true, true);
            }
        }
        None
    }

    #[test]
    fn every_word_of_quotes_backslashes_and_letters_ends_where_a_byte_scan_ends() {
        let alphabet = [b'a', b'\\', b'"'];
        // Every 8-byte word over the three, after prefixes that leave its first byte escaped
        // or not and put it across a block's boundary or not, and followed by a tail that
        // does or does not close the string.
        for n in 0..3usize.pow(8) {
            let mut word = [0u8; 8];
            let mut rest = n;
            for byte in &mut word {
                *byte = alphabet[rest % 3];
                rest /= 3;
            }
            for prefix in [
                &b"abcdefgh"[..],
                b"abcdefg\\",
                b"abcdef\\\\",
                b"\\\\\\\\\\\\\\",
                b"abcdefghijklmnopqrstuvwxyz\\",
                b"abcdefghijklmnopqrstuvwxyz\\\\\\",
            ] {
                for tail in [&b""[..], b"xyz\"", b"\\\"abcdef\"q"] {
                    let bytes = [prefix, &word, tail].concat();
                    assert_eq!(
                        string_end(&bytes, 0),
                        reference(&bytes, 0),
                        "{}",
                        String::from_utf8_lossy(&bytes)
                    );
                }
            }
        }
    }

    #[test]
    fn long_strings_end_at_their_first_unescaped_quote_at_any_offset() {
        // A deterministic spread of lengths and runs; bytes above 0x7f must not match.
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        for _ in 0..20_000 {
            let len = rng.usize(..160);
            let bytes: Vec<u8> = (0..len)
                .map(|_| match rng.u8(..8) {
                    0 | 1 => b'\\',
                    2 => b'"',
                    3 => 0xa2,
                    4 => 0xdc,
                    _ => b'a',
                })
                .collect();
            let from = rng.usize(..4);
            assert_eq!(
                string_end(&bytes, from),
                reference(&bytes, from),
                "{bytes:?}"
            );
        }
    }
}
