//! An upstream body sent gzip-encoded, inflated as it arrives, so framing, filters and the
//! cache read the same JSON they read from a plain body. kube-apiserver gzips the responses
//! above 128 KiB it may (lists, large objects) when asked: on a thin edge link that is most of
//! a re-list's bytes.
//!
//! Memory stays bounded whatever the body: compressed bytes are fed to the decoder a small
//! piece at a time, and what a piece inflates to is handed on before the next piece is fed.

use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use flate2::write::GzDecoder;
use http::HeaderMap;
use http::header::CONTENT_ENCODING;
use http_body::{Body, Frame};
use thiserror::Error;

use crate::error::BoxError;

/// Compressed bytes fed to the decoder at once. DEFLATE inflates at most about 1 032 : 1, so
/// one piece yields at most about 1 MiB, however hostile the body.
const PIECE: usize = 1024;

/// Whether a response's body is gzip-encoded.
pub fn is_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(CONTENT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| coding.trim().eq_ignore_ascii_case("gzip"))
}

/// A gzip body that is not gzip, is cut short or fails its checksum.
#[derive(Debug, Error)]
#[error("the upstream body's gzip encoding is broken")]
pub struct GzipError(#[source] io::Error);

/// `upstream`, a gzip-encoded body, inflated.
pub struct Gunzip<B> {
    upstream: B,
    decoder: GzDecoder<Vec<u8>>,
    /// Compressed bytes received and not yet fed.
    pending: Bytes,
    ended: bool,
}

impl<B> Gunzip<B> {
    /// Inflates `upstream` as it is read.
    pub fn new(upstream: B) -> Gunzip<B> {
        Gunzip {
            upstream,
            decoder: GzDecoder::new(Vec::new()),
            pending: Bytes::new(),
            ended: false,
        }
    }

    /// Feeds the next piece of the pending bytes; what it inflated to, if anything.
    fn feed(&mut self) -> Result<Option<Bytes>, GzipError> {
        let piece = self.pending.split_to(PIECE.min(self.pending.len()));
        // Bytes after the gzip trailer are refused (a zero-length write fails `write_all`).
        self.decoder.write_all(&piece).map_err(GzipError)?;
        self.decoder.flush().map_err(GzipError)?;
        Ok(self.inflated())
    }

    /// The end of the compressed body: the trailer's checksum and length are checked.
    fn finish(&mut self) -> Result<Option<Bytes>, GzipError> {
        self.decoder.try_finish().map_err(GzipError)?;
        Ok(self.inflated())
    }

    fn inflated(&mut self) -> Option<Bytes> {
        let out = std::mem::take(self.decoder.get_mut());
        (!out.is_empty()).then(|| Bytes::from(out))
    }

    fn fail(&mut self, error: BoxError) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.ended = true;
        Poll::Ready(Some(Err(error)))
    }
}

impl<B> Body for Gunzip<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            if !this.pending.is_empty() {
                match this.feed() {
                    Ok(Some(bytes)) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                    Ok(None) => continue,
                    Err(error) => return this.fail(error.into()),
                }
            }
            match ready!(Pin::new(&mut this.upstream).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.pending = data,
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
                Some(Err(error)) => return this.fail(error.into()),
                None => {
                    this.ended = true;
                    return match this.finish() {
                        Ok(Some(bytes)) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
                        Ok(None) => Poll::Ready(None),
                        Err(error) => Poll::Ready(Some(Err(error.into()))),
                    };
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }
}

#[cfg(test)]
mod tests;
