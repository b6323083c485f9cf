//! Watch bodies: events framed line by line, the objects of one read filtered in one call,
//! each event re-encoded as the client is to see it (the visibility rule) and teed; a
//! malformed body or a failed filter ends the watch with an ERROR event, not a broken stream,
//! and an upstream that breaks off (the link lost) ends it cleanly: the client watches again
//! from the last event it got, from the cache if the cloud is gone.

use bytes::{Bytes, BytesMut};
use futures_util::stream::Stream;
use http_body::{Body, Frame};

use super::body::{BATCH, Flow, Framing, Pipeline, drive};
use super::object::Meta;
use super::sink::WatchSink;
use super::stop::Stop;
use super::transform::{TransformError, Verdict};
use super::visibility::Visibility;
use super::watch::{Event, EventType, WatchFramer};
use crate::error::BoxError;
use crate::reply::failure_status;

/// The client's body for a watch response.
pub fn watch<B>(
    upstream: B,
    pipeline: Pipeline<dyn WatchSink>,
) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let framing = WatchFraming {
        framer: WatchFramer::new(),
        visibility: Visibility::default(),
        done: false,
    };
    drive(upstream, framing, pipeline)
}

/// A watch in progress.
struct WatchFraming {
    framer: WatchFramer,
    visibility: Visibility,
    /// Nothing more is read: the body was malformed, a filter failed, or the tee stopped it.
    done: bool,
}

impl Framing for WatchFraming {
    type Tee = dyn WatchSink;
    const KIND: &'static str = "watch";
    const STOPPABLE: bool = true;
    const RESUMABLE: bool = true;

    fn push(&mut self, data: &Bytes) {
        self.framer.push(data);
    }

    fn drain(
        &mut self,
        pipeline: &mut Pipeline<dyn WatchSink>,
        out: &mut BytesMut,
    ) -> Result<Flow, BoxError> {
        if let Err(error) = self.drain_events(pipeline, out) {
            self.malformed(pipeline, out, &error);
        }
        Ok(if self.done { Flow::Done } else { Flow::More })
    }

    fn finish(
        &mut self,
        pipeline: &mut Pipeline<dyn WatchSink>,
        out: &mut BytesMut,
    ) -> Result<(), BoxError> {
        if let Err(error) = self.framer.finish() {
            self.malformed(pipeline, out, &error.into());
        }
        Ok(())
    }

    /// A re-watch from its last version would not bring back what the client misses now:
    /// a 410 makes client-go and kube-rs re-list.
    fn relist(&mut self, message: &str, out: &mut BytesMut) {
        out.extend_from_slice(&status_event(410, "Expired", message));
    }
}

impl WatchFraming {
    /// The upstream's watch body is not the JSON it claims to be: what was good is sent, then
    /// an ERROR event says why the watch ends (the client re-watches or re-lists), and the
    /// tee gives up on the stream.
    fn malformed(
        &mut self,
        pipeline: &mut Pipeline<dyn WatchSink>,
        out: &mut BytesMut,
        error: &BoxError,
    ) {
        self.done = true;
        pipeline.broke_off("watch", error);
        let message = format!("edgegate: the apiserver's watch stream is malformed: {error}");
        out.extend_from_slice(&status_event(500, "InternalError", &message));
    }

    /// Sends every whole event framed so far, at most [`BATCH`] per call into the filters;
    /// events after a malformed one are not read.
    fn drain_events(
        &mut self,
        pipeline: &mut Pipeline<dyn WatchSink>,
        out: &mut BytesMut,
    ) -> Result<(), BoxError> {
        while !self.done {
            let mut events = Vec::new();
            let mut malformed = None;
            while events.len() < BATCH {
                match self.framer.next_frame() {
                    Ok(Some(frame)) => match Event::parse(&frame) {
                        Ok(event) => events.push((frame, event)),
                        Err(error) => {
                            malformed = Some(BoxError::from(error));
                            break;
                        }
                    },
                    Ok(None) => break,
                    Err(error) => {
                        malformed = Some(error.into());
                        break;
                    }
                }
            }
            let read_all = events.len() < BATCH;
            self.send(pipeline, out, events)?;
            if self.done {
                return Ok(());
            }
            if let Some(error) = malformed {
                return Err(error);
            }
            if read_all {
                break;
            }
        }
        Ok(())
    }

    /// Filters the objects of `events` in one call, then sends each event as the client is
    /// to see it. A fail-closed filter's failure ends the watch with an ERROR event instead.
    fn send(
        &mut self,
        pipeline: &mut Pipeline<dyn WatchSink>,
        out: &mut BytesMut,
        events: Vec<(Bytes, Event)>,
    ) -> Result<(), BoxError> {
        let mut verdicts = match verdicts(pipeline, &events) {
            Ok(verdicts) => verdicts.into_iter(),
            Err(error) => {
                out.extend_from_slice(&status_event(500, "InternalError", &error.message));
                self.done = true;
                if let Some(sink) = pipeline.sink.as_mut() {
                    sink.abort(&error.message);
                }
                return Ok(());
            }
        };
        for (frame, event) in events {
            let stop = if pipeline.transform.is_none() || !is_filtered(&event) {
                forward(pipeline, out, &frame, &event)
            } else {
                let verdict = verdicts.next().unwrap_or(Verdict::Keep);
                let key = Meta::parse_checked(&event.object)?.key();
                let mut resent = None;
                if let Some(transform) = pipeline.transform.as_mut() {
                    match event.kind {
                        EventType::Deleted => transform.forget(&key),
                        EventType::Modified => resent = transform.resent(&key),
                        _ => {}
                    }
                }
                let sent = match resent {
                    Some(unchanged) => self
                        .visibility
                        .apply_resent(key, &event, verdict, unchanged),
                    None => self.visibility.apply(key, &event, verdict),
                };
                let Some(sent) = sent else {
                    continue;
                };
                if sent == event {
                    forward(pipeline, out, &frame, &event)
                } else {
                    sent.encode(out);
                    pipeline.sink.as_mut().and_then(|sink| sink.event(&sent))
                }
            };
            if let Some(stop) = stop {
                // The rest of this read is not sent: the client re-lists, or resumes from
                // the event it was sent last.
                self.done = true;
                if let Stop::Relist(message) = stop {
                    out.extend_from_slice(&status_event(410, "Expired", &message));
                }
                break;
            }
        }
        Ok(())
    }
}

/// Sends an event as it came, and tees it; a stop when the tee ends the watch.
fn forward(
    pipeline: &mut Pipeline<dyn WatchSink>,
    out: &mut BytesMut,
    frame: &[u8],
    event: &Event,
) -> Option<Stop> {
    out.extend_from_slice(frame);
    out.extend_from_slice(b"\n");
    pipeline.sink.as_mut().and_then(|sink| sink.event(event))
}

/// The transform's verdicts on the objects of the events it sees, in order.
fn verdicts(
    pipeline: &mut Pipeline<dyn WatchSink>,
    events: &[(Bytes, Event)],
) -> Result<Vec<Verdict>, TransformError> {
    let Some(transform) = pipeline.transform.as_mut() else {
        return Ok(Vec::new());
    };
    let objects: Vec<Bytes> = events
        .iter()
        .filter(|(_, event)| is_filtered(event))
        .map(|(_, event)| event.object.clone())
        .collect();
    match objects.as_slice() {
        [] => Ok(Vec::new()),
        [object] => Ok(vec![transform.apply(object)?]),
        objects => transform.apply_batch(objects),
    }
}

/// Whether an event's object goes through the filters: bookmarks and errors carry none.
fn is_filtered(event: &Event) -> bool {
    !matches!(event.kind, EventType::Bookmark | EventType::Error)
}

/// A watch ERROR event carrying a failure `Status`.
fn status_event(code: u16, reason: &str, message: &str) -> Vec<u8> {
    let event = serde_json::json!({
        "type": "ERROR",
        "object": failure_status(code, reason, message),
    });
    let mut bytes = event.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests;
