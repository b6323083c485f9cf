//! Reading a replacement's top-level fields after those it kept from the original: each key
//! and value checked as it is reached (by the shared scan, or parsed where the value is
//! wanted), so text that is not JSON is refused there, and the object checked to end with
//! nothing but spaces after it.

use edgegate_json_scan::{Check, Paused, checked_value_end};
use serde::Deserialize;

use super::common_tail::CommonTail;

/// The rest of a JSON object's text, read one field at a time.
pub(super) struct ChangedFields<'a> {
    text: &'a str,
    at: usize,
    /// Whether no field was read yet, so the object may close at once.
    first: bool,
}

/// The text is not (the rest of) one JSON object.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("replaced the object with bytes that are not a JSON object")]
pub(super) struct NotJson;

impl From<NotJson> for String {
    fn from(error: NotJson) -> String {
        error.to_string()
    }
}

impl<'a> ChangedFields<'a> {
    /// The rest of an object from just after its opening brace (`first`) or after a field's
    /// value.
    pub(super) fn new(text: &'a str, first: bool) -> ChangedFields<'a> {
        ChangedFields { text, at: 0, first }
    }

    /// The next field's key, JSON text with its quotes, leaving its value to be read; `None`
    /// when the object ended, with nothing but spaces after it.
    pub(super) fn key(&mut self) -> Result<Option<&'a str>, NotJson> {
        let first = std::mem::replace(&mut self.first, false);
        match (self.next_byte(), first) {
            (Some(b'}'), _) => return self.end().map(|()| None),
            (Some(b','), false) => {}
            (Some(_), true) => self.at -= 1,
            _ => return Err(NotJson),
        }
        self.space();
        if self.text.as_bytes().get(self.at) != Some(&b'"') {
            return Err(NotJson);
        }
        let start = self.at;
        self.at = checked_value_end(self.text.as_bytes(), self.at).ok_or(NotJson)?;
        let key = &self.text[start..self.at];
        match self.next_byte() {
            Some(b':') => Ok(Some(key)),
            _ => Err(NotJson),
        }
    }

    /// Passes over the value of the field whose key was just read, checking that it is JSON,
    /// to the comma or brace after it. With the original's `ending`, stops where the text is
    /// found to go on as the original's does instead, and answers `true`: the rest of the
    /// object is then the original's own text, and nothing more need be read.
    pub(super) fn skip(&mut self, mut ending: Option<&mut CommonTail>) -> Result<bool, NotJson> {
        let text = self.text.as_bytes();
        let mut check = Check::member_value(self.at);
        let from = match ending.as_deref_mut() {
            Some(ending) => ending.start(&check),
            None => usize::MAX,
        };
        loop {
            match check.advance(text, from).ok_or(NotJson)? {
                Paused::Comma if ending.as_deref_mut().is_some_and(|e| e.joins(&check)) => {
                    return Ok(true);
                }
                Paused::Comma if check.depth() > 1 => {}
                // Back to the comma or brace after the value, for `key` to read.
                Paused::Comma | Paused::Closed => {
                    self.at = check.at() - 1;
                    return Ok(false);
                }
            }
        }
    }

    /// The value of the field whose key was just read, parsed as `T`.
    pub(super) fn value<T: Deserialize<'a>>(&mut self) -> Result<T, NotJson> {
        let mut values = serde_json::Deserializer::from_str(&self.text[self.at..]).into_iter();
        let value = values.next().and_then(Result::ok).ok_or(NotJson)?;
        self.at += values.byte_offset();
        Ok(value)
    }

    /// The next byte after spaces, consumed.
    fn next_byte(&mut self) -> Option<u8> {
        self.space();
        let byte = *self.text.as_bytes().get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn end(&mut self) -> Result<(), NotJson> {
        self.space();
        if self.at == self.text.len() {
            Ok(())
        } else {
            Err(NotJson)
        }
    }

    fn space(&mut self) {
        let rest = &self.text.as_bytes()[self.at..];
        self.at += rest
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .count();
    }
}
