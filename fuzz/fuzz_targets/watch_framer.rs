//! The watch framer, event parsing and the watch body driver (through a filter that drops
//! some objects, so the visibility rule runs) on arbitrary bytes cut into arbitrary chunks.
//! Invariants: the frames of any chunking are those of one chunk; every frame is the
//! input's own bytes, in order, with only whitespace between; a stream of JSON objects
//! frames without error into exactly those objects; an event read and written again reads
//! the same; the client's body is the same for any chunking, ends in a valid event, and,
//! with no filter, is the upstream's events one per line.
#![no_main]

use bytes::{Bytes, BytesMut};
use edgegate::stream::{
    Event, FrameError, Pipeline, Transform, TransformError, Verdict, WatchFramer, WatchSink, watch,
};
use edgegate_fuzz::{chunks, runtime, seed_and_body, upstream};
use futures_util::StreamExt;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((seed, body)) = seed_and_body(data) else {
        return;
    };
    let pieces = chunks(body, seed);
    let whole = frames(&[body]);
    assert_eq!(whole, frames(&pieces), "a chunking changed the frames");
    let (frames, outcome) = whole;
    in_order(body, &frames);

    let values: Result<Vec<Value>, _> = serde_json::Deserializer::from_slice(body)
        .into_iter::<Value>()
        .collect();
    if let Ok(values) = &values
        && values.iter().all(Value::is_object)
    {
        assert_eq!(outcome, Ok(()), "a stream of objects failed to frame");
        let framed: Vec<Value> = frames
            .iter()
            .map(|frame| serde_json::from_slice(frame).expect("a frame parses"))
            .collect();
        assert_eq!(&framed, values, "the events framed are not the stream's");
    }

    let mut events = Vec::new();
    for frame in &frames {
        let Ok(event) = Event::parse(frame) else {
            break;
        };
        let mut again = BytesMut::new();
        event.encode(&mut again);
        let again = again.freeze();
        assert_eq!(again.last(), Some(&b'\n'));
        assert_eq!(
            Event::parse(&again.slice(..again.len() - 1)),
            Ok(event.clone())
        );
        events.push(frame.clone());
    }

    for filtered in [false, true] {
        let out = drive(&[body], filtered);
        assert_eq!(
            out,
            drive(&pieces, filtered),
            "a chunking changed the client's body"
        );
        // Whatever came, the client reads whole events (the last an ERROR if it was bad).
        let mut framer = WatchFramer::new();
        framer.push(&out);
        while let Some(frame) = framer.next_frame().expect("the client's events frame") {
            Event::parse(&frame).expect("the client's events parse");
        }
        framer
            .finish()
            .expect("the client's body ends between events");
        if !filtered && outcome.is_ok() && events.len() == frames.len() {
            let expected: Vec<u8> = events
                .iter()
                .flat_map(|e| [&e[..], b"\n"].concat())
                .collect();
            assert_eq!(
                out, expected,
                "an unfiltered watch is not passed as it came"
            );
        }
    }
});

/// The frames of `pieces` pushed one by one, and how the body ended.
fn frames(pieces: &[&[u8]]) -> (Vec<Bytes>, Result<(), FrameError>) {
    let mut framer = WatchFramer::new();
    let mut frames = Vec::new();
    for piece in pieces {
        framer.push(piece);
        loop {
            match framer.next_frame() {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(error) => return (frames, Err(error)),
            }
        }
    }
    (frames, framer.finish())
}

/// Every frame is the next stretch of `body`, after whitespace only.
fn in_order(body: &[u8], frames: &[Bytes]) {
    let mut at = 0;
    for frame in frames {
        let gap = body[at..]
            .iter()
            .position(|b| !b.is_ascii_whitespace() || *b == b'\x0c')
            .expect("a frame within the body");
        at += gap;
        assert!(at + frame.len() <= body.len(), "a frame beyond the body");
        assert_eq!(
            &body[at..at + frame.len()],
            &frame[..],
            "a frame not the body's"
        );
        at += frame.len();
    }
}

/// Drops objects whose JSON text is of odd length: the same object always gets the same
/// verdict, whatever the batch it comes in.
struct OddDropper;

impl Transform for OddDropper {
    fn apply(&mut self, object: &Bytes) -> Result<Verdict, TransformError> {
        Ok(match object.len() % 2 {
            1 => Verdict::Drop,
            _ => Verdict::Keep,
        })
    }
}

/// What the client gets of `pieces` through the watch driver.
fn drive(pieces: &[&[u8]], filtered: bool) -> Vec<u8> {
    let pipeline: Pipeline<dyn WatchSink> = Pipeline {
        transform: filtered.then(|| Box::new(OddDropper) as Box<dyn Transform>),
        sink: None,
        stop: None,
    };
    let body = watch(upstream(pieces), pipeline);
    runtime().block_on(async {
        futures_util::pin_mut!(body);
        let mut out = Vec::new();
        while let Some(frame) = body.next().await {
            let frame = frame.expect("a watch ends with an ERROR event, not a broken stream");
            out.extend_from_slice(&frame.into_data().unwrap_or_default());
        }
        out
    })
}
