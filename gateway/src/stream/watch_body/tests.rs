use bytes::Bytes;

use super::super::sink::Sink;
use super::super::test_bodies::{bare, client_reads, upstream};
use super::super::transform::Transform;
use super::*;

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

#[tokio::test]
async fn a_watch_whose_upstream_breaks_off_ends_cleanly_after_its_whole_events() {
    let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
        Ok(Frame::data(Bytes::from(
            r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#
                .to_owned()
                + "\n"
                + r#"{"type":"ADDED","obj"#,
        ))),
        Err(std::io::Error::other("connection reset")),
    ];
    let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
    let (text, errors) = client_reads(watch(body, bare())).await;
    assert_eq!(errors, 0, "a clean end, as at a timeout: {text}");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "the whole event alone: {text}");
    assert_eq!(lines[0]["object"]["metadata"]["name"], "a");
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

/// Drops objects named `drop-*`, renames `edit-*` to `edited`, fails on `fail-*`, tells
/// `same-*` sent again unchanged and `again-*` sent again, and records the size of every
/// call.
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

    fn resent(&mut self, key: &str) -> Option<bool> {
        key.split_once('-').and_then(|(sent, _)| match sent {
            "same" => Some(true),
            "again" => Some(false),
            _ => None,
        })
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

/// Each event the client read, as `TYPE name@resourceVersion` (quoted, as JSON has them).
fn sent(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            let meta = &event["object"]["metadata"];
            let (name, version) = (&meta["name"], &meta["resourceVersion"]);
            format!("{} {name}@{version}", event["type"])
        })
        .collect()
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
    assert_eq!(errors, 0);
    assert_eq!(
        sent(&text),
        [
            r#""ADDED" "a"@"1""#,
            r#""BOOKMARK" ""@"2""#,
            r#""MODIFIED" "edited"@"3""#,
            r#""DELETED" "a"@"4""#
        ]
    );
    assert_eq!(*calls.lock().unwrap(), [3, 1], "one call per read");
}

#[tokio::test]
async fn an_object_sent_again_unchanged_is_held_back() {
    let calls = std::sync::Arc::default();
    let read = [
        // Not met before in this watch: the client holds it from its list.
        event("MODIFIED", "same-a", 2),
        event("MODIFIED", "b", 3),
        // Met before: what it was shown decides.
        event("ADDED", "again-c", 4),
        event("MODIFIED", "again-c", 5),
        event("MODIFIED", "d", 5),
        event("MODIFIED", "d", 6),
    ]
    .concat();
    let body = upstream(vec![chunk(read)]);
    let (text, errors) = client_reads(watch(body, filtered(&calls))).await;

    assert_eq!(errors, 0);
    assert_eq!(
        sent(&text),
        [
            r#""MODIFIED" "b"@"3""#,
            r#""ADDED" "again-c"@"4""#,
            r#""MODIFIED" "d"@"5""#,
            r#""MODIFIED" "d"@"6""#,
        ],
        "an event not sent again goes through, even with nothing but its version new"
    );
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

#[tokio::test(start_paused = true)]
async fn a_stale_watch_sends_nothing_more_and_ends_after_its_jitter() {
    use futures_util::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let body = http_body_util::StreamBody::new(
        tokio_stream_of(rx).map(|b| Ok::<_, std::convert::Infallible>(http_body::Frame::data(b))),
    );
    let (stale_tx, stale_rx) = tokio::sync::oneshot::channel::<()>();
    let after = std::time::Duration::from_secs(1);
    let pipeline: Pipeline<dyn WatchSink> = Pipeline {
        stop: Some(Box::pin(async move {
            let _ = stale_rx.await;
            Stop::Stale {
                message: "the gateway's filters for this watch changed: re-list".into(),
                after,
            }
        })),
        ..bare()
    };
    let body = watch(body, pipeline);
    futures_util::pin_mut!(body);
    tx.send(Bytes::from(event("ADDED", "a", 1))).unwrap();
    let first = body.next().await.unwrap().unwrap().into_data().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("\"a\""));
    let stale_at = tokio::time::Instant::now();
    stale_tx.send(()).unwrap();
    // Filtered by the chain that no longer applies: never sent.
    tx.send(Bytes::from(event("MODIFIED", "b", 2))).unwrap();
    let (rest, errors) = client_reads(body).await;
    assert_eq!(errors, 0);
    let lines: Vec<serde_json::Value> = rest
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{rest}");
    assert_eq!(
        (
            lines[0]["type"].as_str(),
            lines[0]["object"]["code"].as_u64()
        ),
        (Some("ERROR"), Some(410))
    );
    assert!(tokio::time::Instant::now() - stale_at >= after);
}

/// The chunks sent on `rx`, as a stream.
fn tokio_stream_of(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Bytes>,
) -> impl futures_util::Stream<Item = Bytes> + Unpin {
    Box::pin(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}
