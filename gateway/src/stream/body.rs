//! The one driver of list and watch bodies: upstream body → [`Framing`] → bytes for the
//! client. It is a pull stream: it reads upstream only as fast as the client takes bytes, and
//! dropping it (client gone) drops the upstream exchange.
//!
//! Each call for the next chunk steps one loop: drain what the framing has whole into the
//! client's bytes; if there are any, hand them out; else wait until the tee is ready (lists),
//! then read upstream — or, for a watch, until its stop signal resolves.

use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::stream::{self, Stream};
use http_body::{Body, Frame};
use http_body_util::BodyExt;

use super::error::StreamError;
use super::sink::Sink;
use super::stop::{Stop, StopSignal};
use super::transform::Transform;
use crate::error::BoxError;

/// List items (or watch events already read) handed to the transform at once: enough to
/// amortise a call into a filter, few enough that no list is held whole.
pub const BATCH: usize = 64;

/// What a response is sent through besides the framing; `S` is the kind of tee it takes
/// (`dyn ListSink`, `dyn WatchSink`, `dyn ObjectSink`).
pub struct Pipeline<S: ?Sized> {
    /// The filter chain for this request, if any filter applies.
    pub transform: Option<Box<dyn Transform>>,
    /// The cache tee, if the response is cached.
    pub sink: Option<Box<S>>,
    /// Ends an open watch when it resolves: cleanly, or telling the client to re-list.
    pub stop: Option<StopSignal>,
}

impl<S: Sink + ?Sized> Pipeline<S> {
    /// The response of kind `what` broke off: logged, and the tee gives up on it.
    pub(super) fn broke_off(&mut self, what: &str, error: &BoxError) {
        tracing::warn!(%error, "{what} stream broke off");
        if let Some(sink) = self.sink.as_mut() {
            sink.abort(&error.to_string());
        }
    }
}

/// Whether a body goes on after a drain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    /// More may come.
    More,
    /// Nothing more is sent once the bytes written so far are out.
    Done,
}

/// One kind of body (a list, a watch): how upstream bytes become the client's bytes.
pub(super) trait Framing: Send + 'static {
    /// The kind of tee it writes to.
    type Tee: Sink + ?Sized;
    /// The kind of body, for logs.
    const KIND: &'static str;
    /// Whether the pipeline's stop signal ends the body (a watch); a list runs to its end.
    const STOPPABLE: bool;
    /// Whether the body ends cleanly when the upstream's breaks off (a watch: every event
    /// sent was whole, and its client watches again from the last, as after a timeout); a
    /// list's client must see it broken, not whole.
    const RESUMABLE: bool;
    /// Bytes read from upstream.
    fn push(&mut self, data: &Bytes);
    /// Writes into `out` everything framed whole so far, through the pipeline.
    fn drain(
        &mut self,
        pipeline: &mut Pipeline<Self::Tee>,
        out: &mut BytesMut,
    ) -> Result<Flow, BoxError>;
    /// The upstream body ended: writes what remains.
    fn finish(
        &mut self,
        pipeline: &mut Pipeline<Self::Tee>,
        out: &mut BytesMut,
    ) -> Result<(), BoxError>;
    /// The stop signal asked the client to re-list: writes what tells it so.
    fn relist(&mut self, _message: &str, _out: &mut BytesMut) {}
    /// Ready when the next upstream read may be taken in (a list waits for its tee).
    fn poll_ready(
        &mut self,
        _pipeline: &mut Pipeline<Self::Tee>,
        _cx: &mut Context<'_>,
    ) -> Poll<()> {
        Poll::Ready(())
    }
}

/// A body in progress: the upstream, its framing, the pipeline and the client's bytes.
struct Driver<B, F: Framing> {
    upstream: B,
    framing: F,
    pipeline: Pipeline<F::Tee>,
    out: BytesMut,
    done: bool,
}

/// The client's body for `upstream`, framed by `framing` through `pipeline`.
pub(super) fn drive<B, F>(
    upstream: B,
    framing: F,
    pipeline: Pipeline<F::Tee>,
) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
    F: Framing,
{
    let driver = Driver {
        upstream,
        framing,
        pipeline,
        out: BytesMut::new(),
        done: false,
    };
    stream::unfold(driver, |mut driver| async move {
        match driver.next_chunk().await {
            Ok(Some(bytes)) => Some((Ok(Frame::data(bytes)), driver)),
            Ok(None) => None,
            Err(error) => {
                driver.done = true;
                driver.pipeline.broke_off(F::KIND, &error);
                if F::RESUMABLE && matches!(error.downcast_ref(), Some(StreamError::Upstream(_))) {
                    return None;
                }
                Some((Err(error), driver))
            }
        }
    })
}

impl<B, F> Driver<B, F>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
    F: Framing,
{
    /// The next bytes for the client; `None` when the body is done.
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, BoxError> {
        loop {
            if self.done {
                return Ok(None);
            }
            if self.framing.drain(&mut self.pipeline, &mut self.out)? == Flow::Done {
                self.done = true;
            }
            if !self.out.is_empty() {
                return Ok(Some(self.out.split().freeze()));
            }
            if self.done {
                return Ok(None);
            }
            let (framing, pipeline) = (&mut self.framing, &mut self.pipeline);
            std::future::poll_fn(|cx| framing.poll_ready(pipeline, cx)).await;
            let upstream = &mut self.upstream;
            let next = match self.pipeline.stop.as_mut().filter(|_| F::STOPPABLE) {
                // A stop that came is taken first: what arrived with it was read too late.
                Some(stop) => tokio::select! {
                    biased;
                    stop = stop => Err(stop),
                    frame = upstream.frame() => Ok(frame),
                },
                None => Ok(upstream.frame().await),
            };
            // The upstream's error type need not be `Send`: it is boxed at once, before the
            // wait of a stale watch.
            let next: Result<Option<Result<Frame<Bytes>, BoxError>>, Stop> =
                next.map(|frame| frame.map(|frame| frame.map_err(Into::into)));
            match next {
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.framing.push(&data);
                    }
                }
                Ok(Some(Err(error))) => return Err(StreamError::Upstream(error).into()),
                Ok(None) => {
                    self.done = true;
                    self.framing.finish(&mut self.pipeline, &mut self.out)?;
                    if !self.out.is_empty() {
                        return Ok(Some(self.out.split().freeze()));
                    }
                }
                Err(Stop::End) => self.done = true,
                Err(Stop::Relist(message)) => {
                    self.done = true;
                    self.framing.relist(&message, &mut self.out);
                    if !self.out.is_empty() {
                        return Ok(Some(self.out.split().freeze()));
                    }
                }
                Err(Stop::Stale { message, after }) => {
                    self.done = true;
                    tokio::time::sleep(after).await;
                    self.framing.relist(&message, &mut self.out);
                    if !self.out.is_empty() {
                        return Ok(Some(self.out.split().freeze()));
                    }
                }
            }
        }
    }
}

/// The client's body for a response passed through as it came, ending cleanly when `stop`
/// resolves: for watches nothing frames (protobuf, or nothing filters or caches them).
pub fn until<B>(
    upstream: B,
    stop: StopSignal,
) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    stream::unfold(Some((upstream, stop)), |state| async move {
        let (mut upstream, mut stop) = state?;
        tokio::select! {
            frame = upstream.frame() => match frame? {
                Ok(frame) => Some((Ok(frame), Some((upstream, stop)))),
                Err(error) => Some((Err(error.into()), None)),
            },
            _ = &mut stop => None,
        }
    })
}
