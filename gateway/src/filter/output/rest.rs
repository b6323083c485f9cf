//! Reading a replacement's top-level fields after those it kept from the original: each key
//! and value parsed as it is reached, so text that is not JSON is refused there, and the
//! object checked to end with nothing but spaces after it.

use serde::Deserialize;
use serde::de::IgnoredAny;

/// The rest of a JSON object's text, read one field at a time.
pub(super) struct Rest<'a> {
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

impl<'a> Rest<'a> {
    /// The rest of an object from just after its opening brace (`first`) or after a field's
    /// value.
    pub(super) fn new(text: &'a str, first: bool) -> Rest<'a> {
        Rest { text, at: 0, first }
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
        self.value::<IgnoredAny>()?;
        let key = &self.text[start..self.at];
        match self.next_byte() {
            Some(b':') => Ok(Some(key)),
            _ => Err(NotJson),
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
