//! The media type a `Content-Type` header names, read as kube-apiserver reads it.

/// The media type of a `Content-Type` value, lowercase, without its parameters.
pub(super) fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}
