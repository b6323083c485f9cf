//! The response pipeline: upstream body → frames → transform → re-encoded bytes for the
//! client, teed into a [`Sink`]. It is a pull stream: it reads upstream only as fast as the
//! client takes bytes, and dropping it (client gone) drops the upstream exchange.

use std::future::Future;
use std::pin::Pin;

use bytes::{Bytes, BytesMut};
use futures_util::stream::{self, Stream};
use http_body::{Body, Frame};
use http_body_util::BodyExt;

use super::list::{ListFrame, ListFramer};
use super::object::Meta;
use super::sink::{ListEnd, ListSink, Sink, WatchSink};
use super::transform::{Transform, TransformError, Verdict};
use super::visibility::Visibility;
use super::watch::{Event, EventType, WatchFramer, failure_status};
use super::{FrameError, StreamError};
use crate::error::BoxError;

/// List items (or watch events already read) handed to the transform at once: enough to
/// amortise a call into a filter, few enough that no list is held whole.
pub const BATCH: usize = 64;

/// Why an open watch is ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// End the stream cleanly (the cloud went away, the gateway stops).
    End,
    /// End it with an ERROR event `410 Expired`, so the client re-lists: what it would be
    /// shown changed although the objects did not.
    Relist(String),
}

/// Resolves when an open watch must end, and says how.
pub type StopSignal = Pin<Box<dyn Future<Output = Stop> + Send>>;

/// What a response is sent through besides the framing; `S` is the kind of tee it takes
/// (`dyn ListSink`, `dyn WatchSink`).
pub struct Pipeline<S: ?Sized> {
    /// The filter chain for this request, if any filter applies.
    pub transform: Option<Box<dyn Transform>>,
    /// The cache tee, if the response is cached.
    pub sink: Option<Box<S>>,
    /// Ends an open watch when it resolves: cleanly, or telling the client to re-list.
    pub stop: Option<StopSignal>,
}

/// The client's body for a list response.
pub fn list<B>(
    upstream: B,
    pipeline: Pipeline<dyn ListSink>,
) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let state = ListState {
        upstream,
        framer: ListFramer::new(),
        pipeline,
        out: BytesMut::new(),
        head: Bytes::new(),
        sent: 0,
        batch: Vec::with_capacity(BATCH),
        done: false,
    };
    body(state)
}

/// A body made chunk by chunk by one of the framing state machines.
trait Chunks: Send + 'static {
    /// The next chunk for the client; `None` when the body is done.
    fn next_chunk(&mut self) -> impl Future<Output = Result<Option<Bytes>, BoxError>> + Send;
    /// The body broke off with `error`: nothing more is sent.
    fn fail(&mut self, error: &BoxError);
}

/// The client's body, pulled from `state`.
fn body<S: Chunks>(state: S) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send {
    stream::unfold(state, |mut state| async move {
        match state.next_chunk().await {
            Ok(Some(bytes)) => Some((Ok(Frame::data(bytes)), state)),
            Ok(None) => None,
            Err(error) => {
                state.fail(&error);
                Some((Err(error), state))
            }
        }
    })
}

impl<S: Sink + ?Sized> Pipeline<S> {
    /// The response of kind `what` broke off: logged, and the tee gives up on it.
    fn broke_off(&mut self, what: &str, error: &BoxError) {
        tracing::warn!(%error, "{what} stream broke off");
        if let Some(sink) = self.sink.as_mut() {
            sink.abort(&error.to_string());
        }
    }
}

struct ListState<B> {
    upstream: B,
    framer: ListFramer,
    pipeline: Pipeline<dyn ListSink>,
    out: BytesMut,
    /// The list's head, kept to read its metadata at the end.
    head: Bytes,
    /// Items sent so far (a comma precedes every item but the first).
    sent: usize,
    batch: Vec<Bytes>,
    done: bool,
}

impl<B> ListState<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    async fn produce(&mut self) -> Result<Option<Bytes>, BoxError> {
        loop {
            if self.done {
                return Ok(None);
            }
            self.drain()?;
            if !self.out.is_empty() {
                return Ok(Some(self.out.split().freeze()));
            }
            if let Some(sink) = self.pipeline.sink.as_mut() {
                std::future::poll_fn(|cx| sink.poll_ready(cx)).await;
            }
            match self.upstream.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.framer.push(&data);
                    }
                }
                Some(Err(error)) => return Err(StreamError::Upstream(error.into()).into()),
                None => {
                    self.finish()?;
                    self.done = true;
                    if !self.out.is_empty() {
                        return Ok(Some(self.out.split().freeze()));
                    }
                }
            }
        }
    }

    fn drain(&mut self) -> Result<(), BoxError> {
        while let Some(frame) = self.framer.next_frame()? {
            match frame {
                ListFrame::Head(head) => {
                    self.out.extend_from_slice(&head);
                    self.head = head;
                }
                ListFrame::Item(item) => {
                    self.batch.push(item);
                    if self.batch.len() == BATCH {
                        self.flush_batch()?;
                    }
                }
                ListFrame::Tail(tail) => self.out.extend_from_slice(&tail),
            }
        }
        self.flush_batch()
    }

    fn flush_batch(&mut self) -> Result<(), BoxError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let items = std::mem::take(&mut self.batch);
        let verdicts = match self.pipeline.transform.as_mut() {
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
                self.out.extend_from_slice(b",");
            }
            self.out.extend_from_slice(&object);
            self.sent += 1;
            if let Some(sink) = self.pipeline.sink.as_mut() {
                sink.list_item(&object);
            }
        }
        self.batch = items;
        self.batch.clear();
        Ok(())
    }

    fn finish(&mut self) -> Result<(), BoxError> {
        let tail = match self.framer.finish()? {
            Some(ListFrame::Tail(tail)) => {
                self.out.extend_from_slice(&tail);
                tail
            }
            Some(ListFrame::Head(whole)) => {
                self.out.extend_from_slice(&whole);
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
        if let Some(sink) = self.pipeline.sink.as_mut() {
            sink.list_end(ListEnd {
                kind: list.kind.into_owned(),
                api_version: list.api_version.into_owned(),
                resource_version: list.metadata.resource_version.into_owned(),
                continue_token: list.metadata.continue_token.into_owned(),
            });
        }
        Ok(())
    }
}

/// A list without its items: what its end tells the cache.
#[derive(serde::Deserialize)]
struct ListSkeleton<'a> {
    #[serde(borrow, default)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default, rename = "apiVersion")]
    api_version: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    metadata: ListMeta<'a>,
}

/// A list's metadata.
#[derive(Default, serde::Deserialize)]
struct ListMeta<'a> {
    #[serde(borrow, default, rename = "resourceVersion")]
    resource_version: std::borrow::Cow<'a, str>,
    #[serde(borrow, default, rename = "continue")]
    continue_token: std::borrow::Cow<'a, str>,
}

/// The client's body for a watch response.
pub fn watch<B>(
    upstream: B,
    pipeline: Pipeline<dyn WatchSink>,
) -> impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let state = WatchState {
        upstream,
        framer: WatchFramer::new(),
        pipeline,
        visibility: Visibility::default(),
        out: BytesMut::new(),
        done: false,
    };
    body(state)
}

impl<B> Chunks for ListState<B>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    fn next_chunk(&mut self) -> impl Future<Output = Result<Option<Bytes>, BoxError>> + Send {
        self.produce()
    }

    fn fail(&mut self, error: &BoxError) {
        self.done = true;
        self.pipeline.broke_off("list", error);
    }
}

impl<B> Chunks for WatchState<B>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    fn next_chunk(&mut self) -> impl Future<Output = Result<Option<Bytes>, BoxError>> + Send {
        self.produce()
    }

    fn fail(&mut self, error: &BoxError) {
        self.done = true;
        self.pipeline.broke_off("watch", error);
    }
}

struct WatchState<B> {
    upstream: B,
    framer: WatchFramer,
    pipeline: Pipeline<dyn WatchSink>,
    visibility: Visibility,
    out: BytesMut,
    done: bool,
}

impl<B> WatchState<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    async fn produce(&mut self) -> Result<Option<Bytes>, BoxError> {
        loop {
            if self.done {
                return Ok(None);
            }
            if let Err(error) = self.drain() {
                self.malformed(&error);
            }
            if !self.out.is_empty() {
                return Ok(Some(self.out.split().freeze()));
            }
            let upstream = &mut self.upstream;
            let next = match self.pipeline.stop.as_mut() {
                Some(stop) => tokio::select! {
                    frame = upstream.frame() => Ok(frame),
                    stop = stop => Err(stop),
                },
                None => Ok(upstream.frame().await),
            };
            let next = match next {
                Ok(next) => next,
                Err(Stop::End) => {
                    self.done = true;
                    return Ok(None);
                }
                // A re-watch from its last version would not bring back what the client
                // misses now: a 410 makes client-go and kube-rs re-list.
                Err(Stop::Relist(message)) => {
                    self.done = true;
                    return Ok(Some(Bytes::from(status_event(410, "Expired", &message))));
                }
            };
            match next {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.framer.push(&data);
                    }
                }
                Some(Err(error)) => return Err(StreamError::Upstream(error.into()).into()),
                None => {
                    if let Err(error) = self.framer.finish() {
                        self.malformed(&error.into());
                        return Ok(Some(self.out.split().freeze()));
                    }
                    self.done = true;
                    return Ok(None);
                }
            }
        }
    }

    /// The upstream's watch body is not the JSON it claims to be: what was good is sent, then
    /// an ERROR event says why the watch ends (the client re-watches or re-lists), and the
    /// tee gives up on the stream.
    fn malformed(&mut self, error: &BoxError) {
        self.done = true;
        self.pipeline.broke_off("watch", error);
        let message = format!("edgegate: the apiserver's watch stream is malformed: {error}");
        self.out
            .extend_from_slice(&status_event(500, "InternalError", &message));
    }

    /// Sends every whole event framed so far, at most [`BATCH`] per call into the filters;
    /// events after a malformed one are not read.
    fn drain(&mut self) -> Result<(), BoxError> {
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
            self.send(events)?;
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
    fn send(&mut self, events: Vec<(Bytes, Event)>) -> Result<(), BoxError> {
        let mut verdicts = match self.verdicts(&events) {
            Ok(verdicts) => verdicts.into_iter(),
            Err(error) => {
                self.out
                    .extend_from_slice(&status_event(500, "InternalError", &error.message));
                self.done = true;
                if let Some(sink) = self.pipeline.sink.as_mut() {
                    sink.abort(&error.message);
                }
                return Ok(());
            }
        };
        for (frame, event) in events {
            let stop = if self.pipeline.transform.is_none() || !is_filtered(&event) {
                self.forward(&frame, &event)
            } else {
                let verdict = verdicts.next().unwrap_or(Verdict::Keep);
                let key = Meta::parse_checked(&event.object)?.key();
                let Some(sent) = self.visibility.apply(key, &event, verdict) else {
                    continue;
                };
                if sent == event {
                    self.forward(&frame, &event)
                } else {
                    sent.encode(&mut self.out);
                    self.pipeline
                        .sink
                        .as_mut()
                        .and_then(|sink| sink.event(&sent))
                }
            };
            if let Some(stop) = stop {
                // The rest of this read is not sent: the client re-lists, or resumes from
                // the event it was sent last.
                self.done = true;
                if let Stop::Relist(message) = stop {
                    self.out
                        .extend_from_slice(&status_event(410, "Expired", &message));
                }
                break;
            }
        }
        Ok(())
    }

    /// Sends an event as it came, and tees it; a stop when the tee ends the watch.
    fn forward(&mut self, frame: &[u8], event: &Event) -> Option<Stop> {
        self.out.extend_from_slice(frame);
        self.out.extend_from_slice(b"\n");
        self.pipeline
            .sink
            .as_mut()
            .and_then(|sink| sink.event(event))
    }

    /// The transform's verdicts on the objects of the events it sees, in order.
    fn verdicts(&mut self, events: &[(Bytes, Event)]) -> Result<Vec<Verdict>, TransformError> {
        let Some(transform) = self.pipeline.transform.as_mut() else {
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
}

/// Whether an event's object goes through the filters: bookmarks and errors carry none.
fn is_filtered(event: &Event) -> bool {
    !matches!(event.kind, EventType::Bookmark | EventType::Error)
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
mod tests {
    use std::convert::Infallible;

    use http_body_util::StreamBody;

    use super::*;

    fn upstream(
        chunks: Vec<&'static str>,
    ) -> StreamBody<impl Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin> {
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = chunks
            .into_iter()
            .map(|c| Ok(Frame::data(Bytes::from_static(c.as_bytes()))))
            .collect();
        StreamBody::new(stream::iter(frames))
    }

    async fn client_reads(
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

    fn bare<S: ?Sized>() -> Pipeline<S> {
        Pipeline {
            transform: None,
            sink: None,
            stop: None,
        }
    }

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

    #[tokio::test]
    async fn a_malformed_watch_body_ends_with_an_error_event_not_a_broken_stream() {
        let good = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#;
        for bad in [
            "}{\n",
            r#"{"type":"ADDED","object":{"metadata":{"name":"b"]}}"#,
            r#"{"type":"ADDED","obj"#,
        ] {
            let body = upstream(vec![good, "\n", bad]);
            let (text, errors) = client_reads(watch(body, bare())).await;
            let lines: Vec<serde_json::Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(errors, 0, "{bad}: a clean end");
            assert_eq!(lines.len(), 2, "{bad}: {text}");
            assert_eq!(lines[0]["object"]["metadata"]["name"], "a");
            assert_eq!(
                (
                    lines[1]["type"].as_str(),
                    lines[1]["object"]["code"].as_u64()
                ),
                (Some("ERROR"), Some(500)),
                "{bad}"
            );
        }
    }

    /// A tee that cannot take the events named `lost-*`: it ends the watch there.
    struct Lossy;

    impl Sink for Lossy {
        fn abort(&mut self, _reason: &str) {}
    }

    impl WatchSink for Lossy {
        fn event(&mut self, event: &Event) -> Option<Stop> {
            let lost = Meta::parse(&event.object).is_ok_and(|m| m.name.starts_with("lost-"));
            lost.then(|| Stop::Relist("fell behind".into()))
        }
    }

    #[tokio::test]
    async fn a_watch_whose_tee_lost_an_event_ends_after_it_with_a_410() {
        let read = [
            event("ADDED", "a", 1),
            event("MODIFIED", "lost-b", 2),
            event("MODIFIED", "c", 3),
        ]
        .concat();
        let body = upstream(vec![chunk(read), chunk(event("DELETED", "a", 4))]);
        let pipeline: Pipeline<dyn WatchSink> = Pipeline {
            sink: Some(Box::new(Lossy)),
            ..bare()
        };
        let (text, errors) = client_reads(watch(body, pipeline)).await;
        assert_eq!(errors, 0);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let names: Vec<_> = lines
            .iter()
            .map(|l| l["object"]["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, [Some("a"), Some("lost-b"), None], "{text}");
        assert_eq!(
            (
                lines[2]["type"].as_str(),
                lines[2]["object"]["code"].as_u64()
            ),
            (Some("ERROR"), Some(410))
        );
    }

    /// Drops objects named `drop-*`, renames `edit-*` to `edited`, fails on `fail-*`, and
    /// records the size of every call.
    struct Names(std::sync::Arc<std::sync::Mutex<Vec<usize>>>);

    impl Transform for Names {
        fn apply(&mut self, object: &Bytes) -> Result<Verdict, TransformError> {
            self.apply_batch(std::slice::from_ref(object))
                .map(|mut verdicts| verdicts.remove(0))
        }

        fn apply_batch(&mut self, objects: &[Bytes]) -> Result<Vec<Verdict>, TransformError> {
            self.0.lock().unwrap().push(objects.len());
            let verdict = |object: &Bytes| {
                let meta = Meta::parse(object).unwrap();
                match meta.name.split_once('-') {
                    Some(("drop", _)) => Ok(Verdict::Drop),
                    Some(("edit", _)) => Ok(Verdict::Replace(Bytes::from_static(
                        br#"{"metadata":{"name":"edited","resourceVersion":"3"}}"#,
                    ))),
                    Some(("fail", _)) => Err(TransformError {
                        message: "failed closed".into(),
                    }),
                    _ => Ok(Verdict::Keep),
                }
            };
            objects.iter().map(verdict).collect()
        }
    }

    fn event(kind: &str, name: &str, version: u32) -> String {
        format!(
            r#"{{"type":"{kind}","object":{{"metadata":{{"name":"{name}","resourceVersion":"{version}"}}}}}}"#
        ) + "\n"
    }

    /// Test data that lives as long as the upstream stream needs it.
    fn chunk(text: String) -> &'static str {
        text.leak()
    }

    fn filtered(calls: &std::sync::Arc<std::sync::Mutex<Vec<usize>>>) -> Pipeline<dyn WatchSink> {
        Pipeline {
            transform: Some(Box::new(Names(calls.clone()))),
            ..bare()
        }
    }

    #[tokio::test]
    async fn the_events_of_one_read_are_filtered_in_one_call() {
        let calls = std::sync::Arc::default();
        let read = [
            event("ADDED", "a", 1),
            event("BOOKMARK", "", 2),
            event("ADDED", "drop-b", 2),
            event("MODIFIED", "edit-c", 3),
        ]
        .concat();
        let body = upstream(vec![chunk(read), chunk(event("DELETED", "a", 4))]);
        let (text, errors) = client_reads(watch(body, filtered(&calls))).await;
        let names: Vec<String> = text
            .lines()
            .map(|line| {
                let event: serde_json::Value = serde_json::from_str(line).unwrap();
                format!("{} {}", event["type"], event["object"]["metadata"]["name"])
            })
            .collect();
        assert_eq!(errors, 0);
        assert_eq!(
            names,
            [
                r#""ADDED" "a""#,
                r#""BOOKMARK" """#,
                r#""MODIFIED" "edited""#,
                r#""DELETED" "a""#
            ]
        );
        assert_eq!(*calls.lock().unwrap(), [3, 1], "one call per read");
    }

    #[tokio::test]
    async fn a_failed_batch_ends_the_watch_with_an_error_event() {
        let calls = std::sync::Arc::default();
        let read = [event("ADDED", "a", 1), event("ADDED", "fail-b", 2)].concat();
        let body = upstream(vec![chunk(read)]);
        let (text, errors) = client_reads(watch(body, filtered(&calls))).await;
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(errors, 0);
        assert_eq!(lines.len(), 1, "{text}");
        assert_eq!(lines[0]["type"], "ERROR");
        assert_eq!(lines[0]["object"]["message"], "failed closed");
    }
}
