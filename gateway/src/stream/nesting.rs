//! The object a framer is cutting out of its buffer: where it starts, and the scan for the
//! bracket that closes it, carried across chunks (`edgegate_json_scan`: 32 bytes at a time,
//! escaped strings included).

use bytes::{Buf, Bytes, BytesMut};
use edgegate_json_scan::Brackets;

use super::error::FrameError;

/// Where the scan of an object is, carried from one chunk to the next.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Nesting {
    /// Index of the object's opening brace in the framing buffer.
    start: usize,
    /// The scan for its closing bracket.
    brackets: Brackets,
}

impl Nesting {
    /// Whether the scan is inside an object (its closing brace not yet found).
    pub fn within(&self) -> bool {
        self.brackets.within()
    }

    /// The object's opening brace was read, at `start`.
    pub fn enter(&mut self, start: usize) {
        *self = Nesting {
            start,
            brackets: Brackets::opened(),
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
    pub fn close(&mut self, buf: &[u8], from: usize) -> Option<usize> {
        self.brackets.close(buf, from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_cut_with_what_precedes_it_and_only_at_a_brace() {
        let mut buf = BytesMut::from(&br#"[{"a":"}"}, {"b":[1]}]"#[..]);
        let mut nesting = Nesting::default();
        nesting.enter(1);
        // Pushed in two pieces, the first ending inside the string.
        assert_eq!(nesting.close(&buf[..6], 2), None);
        assert!(nesting.within());
        let close = nesting.close(&buf, 6);
        assert_eq!(close, Some(9));
        assert!(!nesting.within());
        assert_eq!(nesting.cut(&mut buf, 9).unwrap(), &br#"{"a":"}"}"#[..]);
        assert_eq!(&buf[..], br#", {"b":[1]}]"#);
        // A bracket of the other kind closes the scan, and the cut refuses it.
        let mut buf = BytesMut::from(&br#"{"a":1]"#[..]);
        nesting.enter(0);
        assert_eq!(nesting.close(&buf, 1), Some(6));
        assert!(matches!(
            nesting.cut(&mut buf, 6),
            Err(FrameError::Malformed)
        ));
    }
}
