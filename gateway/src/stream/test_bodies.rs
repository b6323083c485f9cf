//! What the body tests share: an upstream of chunks, a client that reads a body whole, and a
//! pipeline with nothing in it; and, for the tests of what the client's bytes are made into,
//! a body of those bytes cut into pieces.

use std::convert::Infallible;

use bytes::Bytes;
use futures_util::stream::{self, Stream};
use http_body::Frame;
use http_body_util::StreamBody;

use super::body::Pipeline;
use crate::error::BoxError;

pub fn upstream(
    chunks: Vec<&'static str>,
) -> StreamBody<impl Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin> {
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = chunks
        .into_iter()
        .map(|c| Ok(Frame::data(Bytes::from_static(c.as_bytes()))))
        .collect();
    StreamBody::new(stream::iter(frames))
}

/// `bytes` as a body's stream of frames, cut into pieces of `size` bytes.
pub fn chunked(
    bytes: &[u8],
    size: usize,
) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send + use<> {
    let chunks: Vec<Result<Frame<Bytes>, BoxError>> = bytes
        .chunks(size)
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    stream::iter(chunks)
}

pub async fn client_reads(
    body: impl Stream<Item = Result<Frame<Bytes>, BoxError>>,
) -> (String, usize) {
    use futures_util::StreamExt;
    let (mut text, mut errors) = (String::new(), 0);
    futures_util::pin_mut!(body);
    while let Some(frame) = body.next().await {
        match frame {
            Ok(frame) => text.push_str(&String::from_utf8_lossy(
                &frame.into_data().unwrap_or_default(),
            )),
            Err(_) => errors += 1,
        }
    }
    (text, errors)
}

pub fn bare<S: ?Sized>() -> Pipeline<S> {
    Pipeline {
        transform: None,
        sink: None,
        stop: None,
    }
}
