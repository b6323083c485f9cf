//! Protocol Buffers' wire format, read: a message as the fields it holds, each a number and
//! a value still encoded.

use super::error::TranscodeError;

/// What starts an object encoded in Kubernetes' protobuf.
pub(super) const MAGIC: &[u8] = b"k8s\0";

/// One field's value as it is on the wire.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Value<'a> {
    /// A varint: integers, booleans.
    Varint(u64),
    /// Eight bytes: doubles, fixed 64-bit integers.
    Fixed64(u64),
    /// Length-delimited: strings, bytes, messages, packed repeated numbers.
    Bytes(&'a [u8]),
    /// Four bytes: floats, fixed 32-bit integers.
    Fixed32(u32),
}

/// The fields of an encoded message, in the order they are on the wire.
pub(super) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    /// The fields of `message`.
    pub(super) fn of(message: &'a [u8]) -> Self {
        Fields { rest: message }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), TranscodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = next_field(&mut self.rest);
        if field.is_err() {
            self.rest = &[];
        }
        Some(field)
    }
}

fn next_field<'a>(rest: &mut &'a [u8]) -> Result<(u32, Value<'a>), TranscodeError> {
    let key = varint(rest)?;
    let number = u32::try_from(key >> 3).map_err(|_| TranscodeError::Malformed("field number"))?;
    if number == 0 {
        return Err(TranscodeError::Malformed("field number 0"));
    }
    let value = match key & 7 {
        0 => Value::Varint(varint(rest)?),
        1 => Value::Fixed64(u64::from_le_bytes(
            take(rest, 8)?.try_into().unwrap_or_default(),
        )),
        2 => {
            let len =
                usize::try_from(varint(rest)?).map_err(|_| TranscodeError::Malformed("length"))?;
            Value::Bytes(take(rest, len)?)
        }
        5 => Value::Fixed32(u32::from_le_bytes(
            take(rest, 4)?.try_into().unwrap_or_default(),
        )),
        _ => return Err(TranscodeError::Malformed("wire type")),
    };
    Ok((number, value))
}

/// A varint from the front of `rest`.
pub(super) fn varint(rest: &mut &[u8]) -> Result<u64, TranscodeError> {
    let mut value = 0u64;
    for (i, byte) in rest.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *rest = &rest[i + 1..];
            return Ok(value);
        }
    }
    Err(TranscodeError::Malformed("varint"))
}

fn take<'a>(rest: &mut &'a [u8], len: usize) -> Result<&'a [u8], TranscodeError> {
    if rest.len() < len {
        return Err(TranscodeError::Malformed("cut short"));
    }
    let (taken, left) = rest.split_at(len);
    *rest = left;
    Ok(taken)
}
