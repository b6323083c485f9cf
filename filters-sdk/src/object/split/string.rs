//! Finding where a JSON string ends, eight bytes at a time, escapes included. A word without
//! a backslash is passed over (or ends the string) by a cheap test; in a word with one, the
//! quotes and backslashes are found as bit masks, and the bytes that backslashes escape from
//! the runs of backslashes (odd runs escape the byte after them), so a string full of
//! escapes (a `last-applied-configuration` annotation is JSON inside a string) is still read
//! a word at a time, not stopped at every escape.

/// Every byte of a word `0x01`.
const ONES: u64 = u64::MAX / 255;
/// Every byte's low seven bits.
const LOWS: u64 = ONES * 0x7f;
/// Every byte's high bit.
const HIGHS: u64 = ONES * 0x80;
/// The high bits of the odd bytes.
const ODD: u64 = 0x8000_8000_8000_8000;

/// Where the string whose text begins at `from` (after its opening quote) ends: the index of
/// its closing quote, and whether its text holds an escape; `None` when it does not end.
#[inline]
pub(super) fn string_end(bytes: &[u8], mut from: usize) -> Option<(usize, bool)> {
    while let Some(word) = word_at(bytes, from) {
        let found = zero_byte(word ^ (ONES * u64::from(b'"')))
            | zero_byte(word ^ (ONES * u64::from(b'\\')));
        if found == 0 {
            from += 8;
            continue;
        }
        // The lowest flagged byte is exact; borrows only flag bytes above it.
        let first = from + (found.trailing_zeros() / 8) as usize;
        if bytes[first] == b'"' {
            return Some((first, false));
        }
        return escaped_string_end(bytes, from).map(|end| (end, true));
    }
    byte_at_a_time(bytes, from, false)
}

/// [`string_end`] from the word at `from`, which holds a backslash before any quote. Kept
/// apart so that the common case stays small where it is inlined: a string with one escape
/// (JSON inside a string) tends to have many.
#[inline(never)]
fn escaped_string_end(bytes: &[u8], mut from: usize) -> Option<usize> {
    let mut escaped_next = 0;
    while let Some(word) = word_at(bytes, from) {
        let backslashes = mask_of(word, b'\\');
        let quotes = mask_of(word, b'"') & !escaped(backslashes, &mut escaped_next);
        if quotes != 0 {
            return Some(from + (quotes.trailing_zeros() / 8) as usize);
        }
        from += 8;
    }
    byte_at_a_time(bytes, from, escaped_next != 0).map(|(end, _)| end)
}

/// The end of a string from `from` a byte at a time (the last bytes, fewer than a word),
/// `escape` saying whether the byte at `from` is escaped.
fn byte_at_a_time(bytes: &[u8], from: usize, mut escape: bool) -> Option<(usize, bool)> {
    let mut any_escape = escape;
    for (at, byte) in bytes.iter().enumerate().skip(from) {
        match byte {
            _ if escape => escape = false,
            b'"' => return Some((at, any_escape)),
            b'\\' => (escape, any_escape) = (true, true),
            _ => {}
        }
    }
    None
}

/// The eight bytes at `from` as a little-endian word, if there are eight.
fn word_at(bytes: &[u8], from: usize) -> Option<u64> {
    let mut word = [0; 8];
    word.copy_from_slice(bytes.get(from..from + 8)?);
    Some(u64::from_le_bytes(word))
}

/// The high bit of each zero byte of `word`, and maybe of bytes above the lowest zero one.
fn zero_byte(word: u64) -> u64 {
    word.wrapping_sub(ONES) & !word & HIGHS
}

/// The bytes of `word` equal to `byte`, as the high bit of each.
fn mask_of(word: u64, byte: u8) -> u64 {
    let diff = word ^ (ONES * u64::from(byte));
    // A byte's high bit is set here exactly when the byte is zero: no carry crosses bytes.
    !(((diff & LOWS) + LOWS) | diff) & HIGHS
}

/// The bytes of a word that a backslash escapes, as the high bit of each, given its
/// backslashes and whether its first byte is escaped by the word before (its high bit);
/// sets `escaped_next` to whether the next word's is.
fn escaped(backslashes: u64, escaped_next: &mut u64) -> u64 {
    // A backslash that is itself escaped escapes nothing.
    let starts = backslashes & !*escaped_next;
    // Subtracting each run's start from the odd bytes' bits set after it turns the bits of
    // a run that starts on an even byte to ones and of one that starts on an odd byte to
    // zeros; flipping the odd bits back marks the escaping backslashes of each run, and the
    // byte after a run of odd length. With one bit a byte, a borrow passes the seven zero
    // bits between two bytes' bits as it would pass nothing, and sets them: hence the mask.
    let codes = (((starts << 8) | ODD).wrapping_sub(starts) ^ ODD) & HIGHS;
    let escaped = codes ^ (backslashes | *escaped_next);
    *escaped_next = ((codes & backslashes) >> 63) << 7;
    escaped
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
        // Every 8-byte word over the three, after a prefix that leaves the first byte
        // escaped or not, and followed by a tail that does or does not close the string.
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
            let len = rng.usize(..64);
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
