//! A block's masks from SIMD compares, 16 bytes at a time.

use wide::u8x16;

use super::BLOCK;

/// A block as two 16-byte vectors.
#[derive(Clone, Copy)]
pub(crate) struct Block([u8x16; 2]);

impl Block {
    /// The block of `bytes`.
    #[inline]
    pub(crate) fn new(bytes: &[u8; BLOCK]) -> Block {
        let (halves, _) = bytes.as_chunks::<16>();
        Block([u8x16::new(halves[0]), u8x16::new(halves[1])])
    }

    /// The bytes equal to `byte`, one bit each (bit `i` for byte `i`).
    #[inline]
    pub(crate) fn eq(&self, byte: u8) -> u32 {
        Self::eq_in(&self.0, byte)
    }

    /// The opening brackets (`{`, `[`), and the brackets of either kind.
    #[inline]
    pub(crate) fn brackets(&self) -> (u32, u32) {
        // `[` and `]` differ from `{` and `}` in bit 5 alone, and no other byte folds onto them.
        let lower = u8x16::splat(0x20);
        let folded = [self.0[0] | lower, self.0[1] | lower];
        let opens = Self::eq_in(&folded, b'{');
        (opens, opens | Self::eq_in(&folded, b'}'))
    }

    #[inline]
    fn eq_in(halves: &[u8x16; 2], byte: u8) -> u32 {
        let byte = u8x16::splat(byte);
        halves[0].simd_eq(byte).to_bitmask() | halves[1].simd_eq(byte).to_bitmask() << 16
    }
}
