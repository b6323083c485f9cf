//! The list framer and the list body driver on arbitrary bytes cut into arbitrary chunks.
//! Invariants: the frames of any chunking are the frames of the body in one chunk; every
//! frame is the input's own bytes, in order (head a prefix, tail a suffix, only commas and
//! spaces between items); a body serde_json reads as a list of objects frames without
//! error into exactly its items; and the driver's output is the same for any chunking and,
//! for such a list, the same JSON value as the input.
#![no_main]

use edgegate::stream::{FrameError, ListFrame, ListFramer, ListSink, Pipeline, list};
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
    let split = frames(&pieces);
    assert_eq!(whole, split, "a chunking changed the frames");
    let (frames, outcome) = whole;
    in_order(body, &frames);

    let parsed = serde_json::from_slice::<Value>(body).ok();
    let items = parsed
        .as_ref()
        .and_then(|list| list.get("items"))
        .and_then(Value::as_array);
    // A list kube-apiserver could send: an object whose items are objects, `items` given
    // once, its kind, apiVersion and list metadata strings (the cache reads them at the end).
    let text = |value: Option<&Value>| value.is_none_or(Value::is_string);
    let well_formed = parsed.as_ref().is_some_and(|list| {
        list.is_object()
            && text(list.get("kind"))
            && text(list.get("apiVersion"))
            && list.get("metadata").is_none_or(|meta| {
                meta.is_object() && text(meta.get("resourceVersion")) && text(meta.get("continue"))
            })
    }) && items.is_some_and(|items| items.iter().all(Value::is_object))
        && edgegate_fuzz::json_without_duplicate_keys(body);
    if well_formed {
        assert_eq!(outcome, Ok(()), "a valid list failed to frame");
        let framed: Vec<Value> = frames
            .iter()
            .filter_map(|frame| match frame {
                ListFrame::Item(item) => {
                    Some(serde_json::from_slice(item).expect("an item parses"))
                }
                _ => None,
            })
            .collect();
        assert_eq!(Some(&framed), items, "the items framed are not the list's");
    }

    let whole_out = drive(&[body]);
    assert_eq!(
        whole_out,
        drive(&pieces),
        "a chunking changed the client's body"
    );
    if well_formed {
        let out = whole_out.expect("a valid list passes");
        let sent: Value = serde_json::from_slice(&out).expect("the client's list parses");
        assert_eq!(
            Some(sent),
            parsed,
            "the client's list is not the upstream's"
        );
    }
});

/// The frames of `pieces` pushed one by one, and how the body ended.
fn frames(pieces: &[&[u8]]) -> (Vec<ListFrame>, Result<(), FrameError>) {
    let mut framer = ListFramer::new();
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
    match framer.finish() {
        Ok(last) => frames.extend(last),
        Err(error) => return (frames, Err(error)),
    }
    (frames, Ok(()))
}

/// Every frame is the next stretch of `body`: the head its start, items after it with
/// only separators before each, the tail its end.
fn in_order(body: &[u8], frames: &[ListFrame]) {
    let mut at = 0;
    for frame in frames {
        let bytes = match frame {
            ListFrame::Head(bytes) => {
                assert_eq!(at, 0, "a head after other frames");
                bytes
            }
            ListFrame::Item(bytes) => {
                let gap = body[at..]
                    .iter()
                    .position(|b| !matches!(b, b',' | b' ' | b'\t' | b'\r' | b'\n'))
                    .expect("an item within the body");
                at += gap;
                assert_eq!(bytes.first(), Some(&b'{'), "an item that is not an object");
                bytes
            }
            ListFrame::Tail(bytes) => {
                assert_eq!(
                    &body[body.len() - bytes.len()..],
                    &bytes[..],
                    "a tail not the end"
                );
                let gap = &body[at..body.len() - bytes.len()];
                assert!(
                    gap.iter()
                        .all(|b| matches!(b, b',' | b' ' | b'\t' | b'\r' | b'\n')),
                    "bytes lost before the tail"
                );
                at = body.len();
                continue;
            }
        };
        assert!(at + bytes.len() <= body.len(), "a frame beyond the body");
        assert_eq!(
            &body[at..at + bytes.len()],
            &bytes[..],
            "a frame not the body's"
        );
        at += bytes.len();
    }
}

/// What the client gets of `pieces` through the list driver with no filter and no tee.
fn drive(pieces: &[&[u8]]) -> Result<Vec<u8>, usize> {
    let pipeline: Pipeline<dyn ListSink> = Pipeline {
        transform: None,
        sink: None,
        stop: None,
    };
    let body = list(upstream(pieces), pipeline);
    runtime().block_on(async {
        futures_util::pin_mut!(body);
        let (mut out, mut errors) = (Vec::new(), 0);
        while let Some(frame) = body.next().await {
            match frame {
                Ok(frame) => out.extend_from_slice(&frame.into_data().unwrap_or_default()),
                Err(_) => errors += 1,
            }
        }
        if errors == 0 { Ok(out) } else { Err(errors) }
    })
}
