//! Why a protobuf watch body cannot be turned into JSON.

use thiserror::Error;

/// Why a protobuf watch body cannot be turned into JSON.
#[derive(Debug, Error)]
pub enum TranscodeError {
    /// The bytes are not the protobuf they claim to be.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// A field the gateway does not know (a newer cluster's).
    #[error("field {tag} of {message} is not known")]
    UnknownField {
        /// The message it is in.
        message: &'static str,
        /// Its number.
        tag: u32,
    },
    /// An object of a kind the gateway does not know.
    #[error("an object of {0} is not known")]
    UnknownKind(String),
    /// An object the schema cannot read (a field it does not know holds a value).
    #[error("{0}")]
    Unreadable(String),
    /// An object encoded again (`contentEncoding`).
    #[error("an object encoded as {0:?}")]
    Encoded(String),
    /// A kind, version or event type that is not UTF-8.
    #[error("a string that is not UTF-8")]
    NotUtf8,
    /// A field that holds JSON and does not.
    #[error("a JSON field that is not JSON")]
    NotJson,
    /// An event larger than the largest object the gateway takes.
    #[error("an event of {0} bytes")]
    TooLarge(usize),
    /// The body ended within an event.
    #[error("the body ended within an event")]
    CutShort,
}

impl TranscodeError {
    /// Whether the resource is asked for as JSON from then on: an event received whole that
    /// the gateway cannot read (most likely a newer cluster's). A body cut within an event,
    /// or an event too large for any encoding, is a broken stream instead.
    pub(super) fn refuses_protobuf(&self) -> bool {
        !matches!(self, TranscodeError::CutShort | TranscodeError::TooLarge(_))
    }
}
