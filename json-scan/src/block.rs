//! A 32-byte block of text, the masks of its bytes, and the bytes its backslashes escape.

/// Bytes scanned at once: one bit of a `u32` mask each.
pub(crate) const BLOCK: usize = 32;

/// Whether the target compares 16 bytes at once (else the masks come from words).
macro_rules! simd_target {
    ($item:item) => {
        #[cfg(any(
            all(target_arch = "x86_64", target_feature = "sse2"),
            all(target_arch = "aarch64", target_feature = "neon"),
            all(target_arch = "wasm32", target_feature = "simd128"),
        ))]
        $item
    };
}

/// The opposite of [`simd_target`].
macro_rules! word_target {
    ($item:item) => {
        #[cfg(not(any(
            all(target_arch = "x86_64", target_feature = "sse2"),
            all(target_arch = "aarch64", target_feature = "neon"),
            all(target_arch = "wasm32", target_feature = "simd128"),
        )))]
        $item
    };
}

simd_target! { pub(crate) use lanes::Block; }
word_target! { pub(crate) use words::Block; }

// Both are built for the tests, which check that they agree.
#[cfg(test)]
mod lanes;
#[cfg(not(test))]
simd_target! { mod lanes; }
#[cfg(test)]
mod words;
#[cfg(not(test))]
word_target! { mod words; }

/// The block of `text` at `from` and how many of its bytes are the text's (32, or fewer at
/// its end, the rest zeros, which match nothing a scan looks for); `None` at the end.
#[inline]
pub(crate) fn load(text: &[u8], from: usize) -> Option<(Block, usize)> {
    let rest = text.get(from..).filter(|rest| !rest.is_empty())?;
    if let Some(full) = rest.first_chunk::<BLOCK>() {
        return Some((Block::new(full), BLOCK));
    }
    let mut padded = [0; BLOCK];
    padded[..rest.len()].copy_from_slice(rest);
    Some((Block::new(&padded), rest.len()))
}

/// For a block whose backslashes are `backslashes`, its first byte escaped by the block
/// before when `first_escaped`: those backslashes but that first byte, and the bytes they
/// escape that are not within a run of backslashes (the first byte when `first_escaped`,
/// the byte after each run of odd length, and as bit 32 the next block's first byte). A
/// run escapes the byte after it when it is of odd length: adding a run's first bit to the
/// mask carries through the run to the byte after it, and that byte lies an odd distance
/// from the start exactly then, on an odd bit for a run starting on an even one and the
/// other way round.
#[inline]
pub(crate) fn escaped(backslashes: u32, first_escaped: bool) -> (u32, u64) {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    if backslashes == 0 && !first_escaped {
        return (0, 0);
    }
    let first = u32::from(first_escaped);
    let backslashes = backslashes & !first;
    let starts = u64::from(backslashes & !(backslashes << 1));
    let runs = u64::from(backslashes);
    let after_even = (runs + (starts & EVEN)) & !runs & !EVEN;
    let after_odd = (runs + (starts & !EVEN)) & !runs & EVEN;
    (backslashes, after_even | after_odd | u64::from(first))
}

/// Each bit of `quotes` turned into the parity of the quotes up to and including its byte:
/// the bytes from an opening quote up to its closing one, when the block starts outside a
/// string.
#[inline]
pub(crate) fn prefix_xor(quotes: u32) -> u32 {
    let mut inside = quotes ^ (quotes << 1);
    inside ^= inside << 2;
    inside ^= inside << 4;
    inside ^= inside << 8;
    inside ^ (inside << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_and_words_find_the_bytes_a_byte_compare_finds() {
        let mut rng = fastrand::Rng::with_seed(0x6a09_e667_f3bc_c908);
        let alphabet = b"{}[]\"\\a:, ";
        for round in 0..20_000 {
            let mut bytes = [0u8; BLOCK];
            for byte in &mut bytes {
                // Half the blocks any byte value, half JSON-like.
                *byte = if round % 2 == 0 {
                    rng.u8(..)
                } else {
                    alphabet[rng.usize(..alphabet.len())]
                };
            }
            let (lanes, words) = (lanes::Block::new(&bytes), words::Block::new(&bytes));
            let of = |pick: &dyn Fn(u8) -> bool| {
                (0..BLOCK).fold(0u32, |mask, i| mask | u32::from(pick(bytes[i])) << i)
            };
            for probe in [b'"', b'\\', bytes[rng.usize(..BLOCK)]] {
                let want = of(&|b| b == probe);
                assert_eq!(lanes.eq(probe), want, "{bytes:?} {probe}");
                assert_eq!(words.eq(probe), want, "{bytes:?} {probe}");
            }
            let want = (
                of(&|b| matches!(b, b'{' | b'[')),
                of(&|b| matches!(b, b'{' | b'[' | b'}' | b']')),
            );
            assert_eq!(lanes.brackets(), want, "{bytes:?}");
            assert_eq!(words.brackets(), want, "{bytes:?}");
        }
    }

    #[test]
    fn odd_runs_of_backslashes_escape_the_byte_after_them() {
        // A byte scan's reading of every mask of the low 12 bits, and of a run to the end.
        let reference = |backslashes: u32, mut escape: bool| {
            let first = u32::from(escape);
            let mut bytes = 0u64;
            for i in 0..=BLOCK {
                if escape {
                    // The escaped backslashes within a run are not marked: only what quote
                    // masks and the next block need.
                    if i == 0 || i == BLOCK || backslashes >> i & 1 == 0 {
                        bytes |= 1 << i;
                    }
                    escape = false;
                } else if i < BLOCK && backslashes >> i & 1 != 0 {
                    escape = true;
                }
            }
            (backslashes & !first, bytes)
        };
        for low in 0..1u32 << 12 {
            for high in [0, 0xf000_0000, 0x8000_0000, 0xc000_0000, 0x7000_0000] {
                for first in [false, true] {
                    let backslashes = low | high;
                    assert_eq!(
                        escaped(backslashes, first),
                        reference(backslashes, first),
                        "{backslashes:#x} {first}"
                    );
                }
            }
        }
    }
}
