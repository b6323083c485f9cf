//! A block's masks from eight-byte words, for targets without SIMD compares (wasm32 built
//! without simd128).

use super::BLOCK;

/// Every byte of a word `0x01`.
const ONES: u64 = u64::MAX / 255;
/// Every byte's low seven bits.
const LOWS: u64 = ONES * 0x7f;
/// Every byte's high bit.
const HIGHS: u64 = ONES * 0x80;

/// A block as four little-endian words.
#[derive(Clone, Copy)]
pub(crate) struct Block([u64; 4]);

impl Block {
    /// The block of `bytes`.
    #[inline]
    pub(crate) fn new(bytes: &[u8; BLOCK]) -> Block {
        let (words, _) = bytes.as_chunks::<8>();
        Block(std::array::from_fn(|i| u64::from_le_bytes(words[i])))
    }

    /// The bytes equal to `byte`, one bit each (bit `i` for byte `i`).
    #[inline]
    pub(crate) fn eq(&self, byte: u8) -> u32 {
        Self::eq_in(self.0, byte)
    }

    /// The opening brackets (`{`, `[`), and the brackets of either kind.
    #[inline]
    pub(crate) fn brackets(&self) -> (u32, u32) {
        // `[` and `]` differ from `{` and `}` in bit 5 alone, and no other byte folds onto them.
        let folded = self.0.map(|word| word | (ONES * 0x20));
        let opens = Self::eq_in(folded, b'{');
        (opens, opens | Self::eq_in(folded, b'}'))
    }

    #[inline]
    fn eq_in(words: [u64; 4], byte: u8) -> u32 {
        words.iter().enumerate().fold(0, |mask, (i, &word)| {
            let diff = word ^ (ONES * u64::from(byte));
            // A byte's high bit is set here exactly when the byte is zero: no carry crosses bytes.
            let highs = !(((diff & LOWS) + LOWS) | diff) & HIGHS;
            // The multiply gathers the eight high bits into the top byte, byte `i`'s as bit `i`.
            let bits = (highs.wrapping_mul(0x0002_0408_1020_4081) >> 56) as u32;
            mask | bits << (8 * i)
        })
    }
}
