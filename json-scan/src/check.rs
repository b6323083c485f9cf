//! Checking that text is JSON while finding where a value ends: what a JSON parser refuses
//! (a bad escape, a control character in a string, a number or literal that is not one, a
//! bracket of the wrong kind, a missing comma or colon) is refused here too, and nothing is
//! built. Strings are passed over eight bytes at a time; nesting is tracked with one bit a
//! level, so hostile depth costs no recursion.
//!
//! A [`Check`] pauses after each comma, where what follows depends only on the objects and
//! arrays open: two checks paused with the same ones open read the same text the same way,
//! so a caller that knows how one text goes on can stop checking another that goes on alike.

/// Where the JSON value that begins at `from` (after any spaces) ends: the index just past
/// it, once every byte of it was checked to be JSON; `None` when it is not, or is cut short.
/// The text is taken to be UTF-8 (a caller with bytes from elsewhere checks that first).
pub fn checked_value_end(text: &[u8], from: usize) -> Option<usize> {
    let mut check = Check::value(from);
    check.advance(text, usize::MAX)?;
    Some(check.at)
}

/// A check of JSON text under way, paused after a comma or where its value ended.
#[derive(Debug, Clone)]
pub struct Check {
    open: Open,
    at: usize,
    next: Next,
    /// How deep the commas it always pauses after lie: 1 for a member's value (the commas
    /// between its object's members), 0 for a value.
    pauses_within: usize,
}

/// What the text holds at a check's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// A value, after any spaces.
    Value,
    /// A member of an object, after any spaces: its key, a colon and its value.
    Member,
    /// What follows a value: spaces, then a comma or a closing bracket.
    After,
}

/// Where [`Check::advance`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paused {
    /// Just after a comma: a member or a value comes next.
    Comma,
    /// What the check began with ended just before [`Check::at`]: the value, or the object
    /// the value was a member of.
    Closed,
}

impl Check {
    /// A check of the value that begins at `at`, after any spaces.
    pub fn value(at: usize) -> Check {
        Check {
            open: Open::default(),
            at,
            next: Next::Value,
            pauses_within: 0,
        }
    }

    /// A check of the value that begins at `at` (after any spaces) as the value of a member
    /// of an object, whose key and colon were read: the check goes on after it, through the
    /// object's later members, to its closing brace.
    pub fn member_value(at: usize) -> Check {
        let mut check = Check::value(at);
        check.open.push(true);
        check.pauses_within = 1;
        check
    }

    /// The index the check has reached.
    pub fn at(&self) -> usize {
        self.at
    }

    /// How many objects and arrays are open around the check.
    pub fn depth(&self) -> usize {
        self.open.depth
    }

    /// Whether `other` is paused with the same objects and arrays open, to read the same
    /// thing next: if the texts the two read go on with the same bytes, they read them alike.
    pub fn reads_alike(&self, other: &Check) -> bool {
        self.next == other.next && self.open == other.open
    }

    /// Checks `text` on from the check's index to just after the next comma at or after
    /// `from` or of the object the check began in (a member's), or to the end of what it
    /// began with; `None` when the text is not JSON or ends first.
    pub fn advance(&mut self, text: &[u8], from: usize) -> Option<Paused> {
        let (mut at, mut next) = (self.at, self.next);
        let paused = loop {
            match next {
                Next::Member => {
                    at = key_and_colon(text, space(text, at))?;
                    next = Next::Value;
                }
                Next::Value => {
                    at = space(text, at);
                    (at, next) = match *text.get(at)? {
                        b'"' => (checked_string_end(text, at + 1)? + 1, Next::After),
                        opening @ (b'{' | b'[') => {
                            at = space(text, at + 1);
                            // `}` and `]` follow their opening brackets but one in ASCII.
                            if text.get(at) == Some(&(opening + 2)) {
                                (at + 1, Next::After)
                            } else {
                                let object = opening == b'{';
                                self.open.push(object);
                                (at, if object { Next::Member } else { Next::Value })
                            }
                        }
                        b'-' | b'0'..=b'9' => (number_end(text, at)?, Next::After),
                        b't' => (literal_end(text, at, b"true")?, Next::After),
                        b'f' => (literal_end(text, at, b"false")?, Next::After),
                        b'n' => (literal_end(text, at, b"null")?, Next::After),
                        _ => return None,
                    };
                }
                Next::After => {
                    let Some(object) = self.open.top() else {
                        break Paused::Closed;
                    };
                    at = space(text, at);
                    match (*text.get(at)?, object) {
                        (b',', _) => {
                            at += 1;
                            next = if object { Next::Member } else { Next::Value };
                            if at > from || self.open.depth <= self.pauses_within {
                                break Paused::Comma;
                            }
                        }
                        (b'}', true) | (b']', false) => {
                            self.open.pop();
                            at += 1;
                            if self.open.depth == 0 {
                                break Paused::Closed;
                            }
                        }
                        _ => return None,
                    }
                }
            }
        };
        (self.at, self.next) = (at, next);
        Some(paused)
    }
}

/// Where the string whose text begins at `from` ends (its closing quote), its escapes and
/// its bytes checked: no control character, and only the escapes JSON has.
fn checked_string_end(text: &[u8], mut from: usize) -> Option<usize> {
    loop {
        from = special_byte(text, from);
        match *text.get(from)? {
            b'"' => return Some(from),
            b'\\' => {
                from += match text.get(from + 1..)? {
                    [b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't', ..] => 2,
                    [b'u', a, b, c, d, ..]
                        if [a, b, c, d].iter().all(|digit| digit.is_ascii_hexdigit()) =>
                    {
                        6
                    }
                    _ => return None,
                }
            }
            _ => return None,
        }
    }
}

/// The index of the first byte from `from` that a string cannot hold as it is (a quote, a
/// backslash, a control character), or the text's length. Eight bytes at a time: Kubernetes
/// strings are mostly names and addresses, too short for a block of 32 to pay off, and a
/// word's bytes are told apart without a table.
fn special_byte(text: &[u8], from: usize) -> usize {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES << 7;
    // Sets the high bit of each byte that is zero (and may set it for a byte after a zero
    // one, which the lowest set bit never is).
    let zeros = |word: u64| word.wrapping_sub(ONES) & !word & HIGH;
    let rest = text.get(from..).unwrap_or_default();
    let (words, tail) = rest.as_chunks::<8>();
    for (index, word) in words.iter().enumerate() {
        let word = u64::from_le_bytes(*word);
        let special = zeros(word ^ (ONES * u64::from(b'"')))
            | zeros(word ^ (ONES * u64::from(b'\\')))
            | (word.wrapping_sub(ONES * 0x20) & !word & HIGH);
        if special != 0 {
            return from + index * 8 + special.trailing_zeros() as usize / 8;
        }
    }
    let done = from + words.len() * 8;
    done + tail
        .iter()
        .take_while(|&&byte| byte != b'"' && byte != b'\\' && byte >= 0x20)
        .count()
}

/// After an object's opening brace or a comma in it, and spaces: a key, spaces and a colon,
/// then spaces; where its value begins.
fn key_and_colon(text: &[u8], at: usize) -> Option<usize> {
    if text.get(at) != Some(&b'"') {
        return None;
    }
    let at = space(text, checked_string_end(text, at + 1)? + 1);
    (text.get(at) == Some(&b':')).then(|| space(text, at + 1))
}

/// Where the number that begins at `at` ends: `-`, an integer without leading zeros, then
/// optionally a fraction and an exponent, each with at least one digit.
fn number_end(text: &[u8], mut at: usize) -> Option<usize> {
    if text.get(at) == Some(&b'-') {
        at += 1;
    }
    match text.get(at)? {
        b'0' => at += 1,
        b'1'..=b'9' => at = digits_end(text, at + 1),
        _ => return None,
    }
    if text.get(at) == Some(&b'.') {
        at = some_digits_end(text, at + 1)?;
    }
    if matches!(text.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(text.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        at = some_digits_end(text, at)?;
    }
    Some(at)
}

/// Where the digits from `at` end (at `at` when there are none).
fn digits_end(text: &[u8], at: usize) -> usize {
    at + text[at..]
        .iter()
        .take_while(|byte| byte.is_ascii_digit())
        .count()
}

/// Where the digits from `at` end; `None` when there are none.
fn some_digits_end(text: &[u8], at: usize) -> Option<usize> {
    let end = digits_end(text, at);
    (end > at).then_some(end)
}

fn literal_end(text: &[u8], at: usize, literal: &[u8]) -> Option<usize> {
    text[at..]
        .starts_with(literal)
        .then_some(at + literal.len())
}

/// The index of the first byte from `at` that is not JSON's white space.
#[inline]
fn space(text: &[u8], at: usize) -> usize {
    // Compact JSON, as kube-apiserver writes it, has no spaces: one compare says so.
    match text.get(at) {
        Some(b' ' | b'\t' | b'\n' | b'\r') => {}
        _ => return at,
    }
    at + text[at..]
        .iter()
        .take_while(|byte| matches!(byte, b' ' | b'\t' | b'\n' | b'\r'))
        .count()
}

/// The objects and arrays open around the scan, innermost last: a bit each, set for an
/// object, and no bit set above the innermost. The first 64 levels live in a word; deeper
/// ones, which no Kubernetes object reaches, in a vector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Open {
    depth: usize,
    word: u64,
    deeper: Vec<u64>,
}

impl Open {
    fn push(&mut self, object: bool) {
        let (word, bit) = (self.depth / 64, self.depth % 64);
        if word > 0 && bit == 0 {
            self.deeper.push(0);
        }
        *self.word_mut(word) |= u64::from(object) << bit;
        self.depth += 1;
    }

    fn pop(&mut self) {
        self.depth -= 1;
        let (word, bit) = (self.depth / 64, self.depth % 64);
        if word > 0 && bit == 0 {
            self.deeper.pop();
        } else {
            *self.word_mut(word) &= !(1 << bit);
        }
    }

    /// Whether the innermost open value is an object; `None` when none is open.
    fn top(&self) -> Option<bool> {
        let at = self.depth.checked_sub(1)?;
        let bits = match at / 64 {
            0 => self.word,
            word => self.deeper[word - 1],
        };
        Some(bits >> (at % 64) & 1 != 0)
    }

    fn word_mut(&mut self, word: usize) -> &mut u64 {
        match word {
            0 => &mut self.word,
            word => &mut self.deeper[word - 1],
        }
    }
}

#[cfg(test)]
mod tests;
