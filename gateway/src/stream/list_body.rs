//! List bodies: items framed as they arrive, filtered a batch at a time, re-joined for the
//! client and teed item by item; the list's metadata read at its end.

use std::borrow::Cow;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::stream::Stream;
use http_body::{Body, Frame};

use super::body::{BATCH, Flow, Framing, Pipeline, drive};
use super::error::{FrameError, StreamError};
use super::list::{ListFrame, ListFramer};
use super::sink::{ListEnd, ListSink};
use super::transform::Verdict;
use crate::error::BoxError;

/// The client's body for a list response.
pub fn list<B>(
    upstream: B,
    pipeline: Pipeline<dyn ListSink>,
) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let framing = ListFraming {
        framer: ListFramer::new(),
        head: Bytes::new(),
        sent: 0,
        batch: Vec::with_capacity(BATCH),
    };
    drive(upstream, framing, pipeline)
}

/// A list in progress.
struct ListFraming {
    framer: ListFramer,
    /// The list's head, kept to read its metadata at the end.
    head: Bytes,
    /// Items sent so far (a comma precedes every item but the first).
    sent: usize,
    batch: Vec<Bytes>,
}

impl Framing for ListFraming {
    type Tee = dyn ListSink;
    const KIND: &'static str = "list";
    const STOPPABLE: bool = false;
    const RESUMABLE: bool = false;

    fn push(&mut self, data: &Bytes) {
        self.framer.push(data);
    }

    fn drain(
        &mut self,
        pipeline: &mut Pipeline<dyn ListSink>,
        out: &mut BytesMut,
    ) -> Result<Flow, BoxError> {
        while let Some(frame) = self.framer.next_frame()? {
            match frame {
                ListFrame::Head(head) => {
                    out.extend_from_slice(&head);
                    self.head = head;
                }
                ListFrame::Item(item) => {
                    self.batch.push(item);
                    if self.batch.len() == BATCH {
                        self.flush_batch(pipeline, out)?;
                    }
                }
                ListFrame::Tail(tail) => out.extend_from_slice(&tail),
            }
        }
        self.flush_batch(pipeline, out)?;
        Ok(Flow::More)
    }

    fn finish(
        &mut self,
        pipeline: &mut Pipeline<dyn ListSink>,
        out: &mut BytesMut,
    ) -> Result<(), BoxError> {
        let tail = match self.framer.finish()? {
            Some(ListFrame::Tail(tail)) => {
                out.extend_from_slice(&tail);
                tail
            }
            Some(ListFrame::Head(whole)) => {
                out.extend_from_slice(&whole);
                self.head = whole;
                Bytes::new()
            }
            _ => Bytes::new(),
        };
        // Head and tail together are the list without its items: small, and valid JSON.
        let mut skeleton = Vec::with_capacity(self.head.len() + tail.len());
        skeleton.extend_from_slice(&self.head);
        skeleton.extend_from_slice(&tail);
        let list: ListSkeleton<'_> =
            serde_json::from_slice(&skeleton).map_err(|_| FrameError::BadObject)?;
        if let Some(sink) = pipeline.sink.as_mut() {
            sink.list_end(ListEnd {
                kind: list.kind.into_owned(),
                api_version: list.api_version.into_owned(),
                resource_version: list.metadata.resource_version.into_owned(),
                continue_token: list.metadata.continue_token.into_owned(),
            });
        }
        Ok(())
    }

    fn poll_ready(
        &mut self,
        pipeline: &mut Pipeline<dyn ListSink>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        match pipeline.sink.as_mut() {
            Some(sink) => sink.poll_ready(cx),
            None => Poll::Ready(()),
        }
    }
}

impl ListFraming {
    fn flush_batch(
        &mut self,
        pipeline: &mut Pipeline<dyn ListSink>,
        out: &mut BytesMut,
    ) -> Result<(), BoxError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let items = std::mem::take(&mut self.batch);
        let verdicts = match pipeline.transform.as_mut() {
            Some(transform) => transform.apply_batch(&items)?,
            None => vec![Verdict::Keep; items.len()],
        };
        if verdicts.len() != items.len() {
            return Err(StreamError::VerdictCount.into());
        }
        for (item, verdict) in items.iter().zip(verdicts) {
            let object = match verdict {
                Verdict::Keep => item.clone(),
                Verdict::Replace(bytes) => bytes,
                Verdict::Drop => continue,
            };
            if self.sent > 0 {
                out.extend_from_slice(b",");
            }
            out.extend_from_slice(&object);
            self.sent += 1;
            if let Some(sink) = pipeline.sink.as_mut() {
                sink.list_item(&object);
            }
        }
        self.batch = items;
        self.batch.clear();
        Ok(())
    }
}

/// A list without its items: what its end tells the cache.
#[derive(serde::Deserialize)]
struct ListSkeleton<'a> {
    #[serde(borrow, default)]
    kind: Cow<'a, str>,
    #[serde(borrow, default, rename = "apiVersion")]
    api_version: Cow<'a, str>,
    #[serde(borrow, default)]
    metadata: ListMeta<'a>,
}

/// A list's metadata.
#[derive(Default, serde::Deserialize)]
struct ListMeta<'a> {
    #[serde(borrow, default, rename = "resourceVersion")]
    resource_version: Cow<'a, str>,
    #[serde(borrow, default, rename = "continue")]
    continue_token: Cow<'a, str>,
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures_util::stream;
    use http_body_util::StreamBody;

    use super::super::sink::Sink;
    use super::super::test_bodies::{bare, client_reads};
    use super::*;

    /// A sink that is ready only once its gate is open, and counts the items it took.
    struct Gate {
        open: std::sync::Arc<std::sync::atomic::AtomicBool>,
        items: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Sink for Gate {
        fn abort(&mut self, _reason: &str) {}
    }

    impl ListSink for Gate {
        fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
            if self.open.load(std::sync::atomic::Ordering::SeqCst) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        }
        fn list_item(&mut self, _object: &Bytes) {
            self.items.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        fn list_end(&mut self, _end: ListEnd) {}
    }

    #[tokio::test]
    async fn a_list_reads_upstream_only_when_its_sink_is_ready() {
        use futures_util::{FutureExt, StreamExt};
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let (open, items, pulled) = (
            std::sync::Arc::new(AtomicBool::new(false)),
            std::sync::Arc::new(AtomicUsize::new(0)),
            std::sync::Arc::new(AtomicUsize::new(0)),
        );
        let counted = pulled.clone();
        let upstream = StreamBody::new(
            stream::iter([
                r#"{"kind":"List","metadata":{},"items":[{"metadata":{"name":"a"}}"#,
                r#",{"metadata":{"name":"b"}}]}"#,
            ])
            .map(|chunk| Ok::<_, Infallible>(Frame::data(Bytes::from_static(chunk.as_bytes()))))
            .inspect(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
            }),
        );
        let pipeline: Pipeline<dyn ListSink> = Pipeline {
            sink: Some(Box::new(Gate {
                open: open.clone(),
                items: items.clone(),
            })),
            ..bare()
        };
        let body = list(upstream, pipeline);
        futures_util::pin_mut!(body);
        assert!(body.next().now_or_never().is_none(), "waits for the sink");
        assert_eq!(pulled.load(Ordering::SeqCst), 0, "nothing read upstream");

        open.store(true, Ordering::SeqCst);
        let (text, errors) = client_reads(body).await;
        assert_eq!(errors, 0);
        assert_eq!(
            text,
            r#"{"kind":"List","metadata":{},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#
        );
        assert_eq!(items.load(Ordering::SeqCst), 2);
    }
}
