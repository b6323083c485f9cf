//! Finding the bracket that closes an object or array, across pieces of text that arrive
//! one after another: quotes outside escapes say which bytes lie inside strings (a prefix
//! XOR of their mask), and only the brackets outside strings are visited. A block with a
//! backslash outside a string (not JSON) is read byte by byte, so every text is read as the
//! byte scan reads it.

use crate::block;

/// Where the scan of a value is, carried from one piece of text to the next.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Brackets {
    /// Brackets open, the value's own included; zero outside the value.
    depth: u32,
    /// Inside a string.
    inside: bool,
    /// Inside a string, just after a backslash: the next byte is escaped.
    escape: bool,
}

impl Brackets {
    /// The scan of a value whose opening bracket was just read.
    pub fn opened() -> Brackets {
        Brackets {
            depth: 1,
            ..Brackets::default()
        }
    }

    /// Whether the scan is inside the value (its closing bracket not yet found).
    pub fn within(&self) -> bool {
        self.depth > 0
    }

    /// Scans `text` from `from` (inside the value) for the bracket that closes it: its
    /// index, or `None` when the text ends first. Brackets of either kind close either kind;
    /// a caller that cares checks the one found. Either way the scan is then outside the value.
    pub fn close(&mut self, text: &[u8], mut from: usize) -> Option<usize> {
        while let Some((block, len)) = block::load(text, from) {
            let (backslashes, escaped) = block::escaped(block.eq(b'\\'), self.escape);
            let quotes = block.eq(b'"') & !(escaped as u32);
            let mut inside = block::prefix_xor(quotes);
            if self.inside {
                inside = !inside;
            }
            // A backslash outside a string (not JSON) escapes nothing there: the byte scan's
            // reading of it is the one kept.
            if backslashes & !inside != 0 {
                if let Some(at) = self.close_bytes(&text[..from + len], from) {
                    return Some(at);
                }
                from += len;
                continue;
            }
            let (opens, mut brackets) = block.brackets();
            brackets &= !inside;
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
            self.inside = inside >> (len - 1) & 1 != 0;
            self.escape = escaped >> len & 1 != 0;
            from += len;
        }
        None
    }

    /// [`Brackets::close`] one byte at a time: for a block with a backslash outside a string.
    fn close_bytes(&mut self, text: &[u8], from: usize) -> Option<usize> {
        for (at, &byte) in text.iter().enumerate().skip(from) {
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
mod tests;
