//! The body of the multiplexer's answers.

/// The body of the multiplexer's answers (they cannot fail: their bytes are in memory).
pub type SharedBody =
    http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, std::convert::Infallible>;
