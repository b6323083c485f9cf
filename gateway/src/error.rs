//! What every module shares about errors: the boxed error of bodies and streams, and an
//! error's causes on one line.

/// A boxed error from a body, a connection or a pipeline stage.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An error and its causes on one line, `outer: cause: root cause`, for logs and `Status`
/// messages.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Wrappers that repeat their cause verbatim add nothing.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
