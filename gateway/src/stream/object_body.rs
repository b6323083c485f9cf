//! Single-object bodies (get, create, update, patch): read whole up to a bound, filtered and
//! teed as one.

use bytes::Bytes;
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use thiserror::Error;

use super::body::Pipeline;
use super::error::MAX_OBJECT;
use super::sink::ObjectSink;
use super::transform::Verdict;
use crate::error::BoxError;

/// Why a single object is not sent as it came.
#[derive(Debug, Error)]
pub enum ObjectError {
    /// The upstream body failed or exceeded [`MAX_OBJECT`].
    #[error("the apiserver's answer could not be read")]
    Unreadable(#[source] BoxError),
    /// A fail-closed filter failed on it.
    #[error("{0}")]
    Filter(String),
    /// A filter hides it from this component, and the request reads it.
    #[error("the object is not visible to this component")]
    Hidden,
}

/// The object of `upstream` as the client is to get it, filtered through `pipeline` and
/// teed. A dropped object is [`ObjectError::Hidden`] when the request `reads` it; a write's
/// answer is left as it came.
pub async fn object<B>(
    upstream: B,
    mut pipeline: Pipeline<dyn ObjectSink>,
    reads: bool,
) -> Result<Bytes, ObjectError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let object = match Limited::new(upstream, MAX_OBJECT).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            if let Some(sink) = pipeline.sink.as_mut() {
                sink.abort("the object could not be read");
            }
            return Err(ObjectError::Unreadable(error));
        }
    };
    let verdict = match pipeline.transform.as_mut() {
        Some(transform) => transform
            .apply(&object)
            .map_err(|error| ObjectError::Filter(error.message))?,
        None => Verdict::Keep,
    };
    let sent = match verdict {
        Verdict::Keep => object,
        Verdict::Replace(bytes) => bytes,
        Verdict::Drop if reads => return Err(ObjectError::Hidden),
        Verdict::Drop => object,
    };
    if let Some(sink) = pipeline.sink.as_mut() {
        sink.object(&sent);
    }
    Ok(sent)
}
