//! The protobuf watch transcoder (`ProtobufBody`) on arbitrary bytes cut into arbitrary
//! chunks, as a watch of Services, v1 or v1beta1 EndpointSlices (the seed's top byte picks).
//! Invariants: the JSON is the same for any chunking, and so is how the body ends; it is
//! whole watch events, one per line, each a JSON object with a type and an object, which the
//! event parser reads when the type is one kube-apiserver sends; each event holds what Kubernetes' descriptors read of its frame's object, where
//! the frame is as Go's encoder writes one (each field once), but for the members JSON
//! leaves out (zeros, empty strings, lists and objects).
#![no_main]

use bytes::Bytes;
use edgegate::fuzzing::reference_objects;
use edgegate::stream::{Event, ProtobufBody, WatchFramer};
use edgegate_fuzz::{chunks, json_without_duplicate_keys, runtime, seed_and_body, upstream};
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const RESOURCES: [(&str, &str, &str); 3] = [
    ("", "v1", "services"),
    ("discovery.k8s.io", "v1", "endpointslices"),
    ("discovery.k8s.io", "v1beta1", "endpointslices"),
];

const KNOWN_TYPES: [&str; 5] = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"];

fuzz_target!(|data: &[u8]| {
    let Some((seed, body)) = seed_and_body(data) else {
        return;
    };
    let resource = RESOURCES[(seed >> 24) as usize % RESOURCES.len()];
    let pieces = chunks(body, seed);
    let whole = transcode(&[body], resource);
    assert_eq!(
        whole,
        transcode(&pieces, resource),
        "a chunking changed the JSON"
    );
    let (json, _) = whole;

    let mut framer = WatchFramer::new();
    framer.push(&json);
    let mut lines = Vec::new();
    while let Some(line) = framer.next_frame().expect("the JSON frames as a watch") {
        let event: Value = serde_json::from_slice(&line).unwrap_or_else(|error| {
            panic!(
                "a line is no JSON ({error}): {}",
                String::from_utf8_lossy(&line)
            )
        });
        assert!(
            event["type"].is_string() && event["object"].is_object(),
            "{event}"
        );
        // The event types kube-apiserver sends read as events; any other is the watch
        // driver's to refuse, as on a JSON watch.
        if KNOWN_TYPES.contains(&event["type"].as_str().unwrap_or_default()) {
            Event::parse(&line).expect("a watch event");
        }
        lines.push(line);
    }
    framer.finish().expect("the JSON ends between events");
    assert!(
        json.is_empty() || json.ends_with(b"\n"),
        "an event per line"
    );

    for (line, expected) in lines.iter().zip(reference_objects(body)) {
        let Some(expected) = expected else {
            continue;
        };
        if !json_without_duplicate_keys(line) {
            continue;
        }
        let event: Value = serde_json::from_slice(line).expect("checked above");
        assert_eq!(
            written(&event["object"]),
            written(&expected),
            "the event's object is not what the descriptors read: {event}"
        );
    }
});

/// The JSON of `pieces` through the transcoder, and how its body ended (an error's text).
fn transcode(
    pieces: &[&[u8]],
    (group, version, resource): (&str, &str, &str),
) -> (Vec<u8>, Result<(), String>) {
    let mut body = ProtobufBody::watch(upstream(pieces), group, version, resource);
    runtime().block_on(async {
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => {
                    out.extend_from_slice(&frame.into_data().unwrap_or_else(|_| Bytes::new()))
                }
                Err(error) => return (out, Err(error.to_string())),
            }
        }
        (out, Ok(()))
    })
}

/// `value` without the members Go's JSON leaves out where they are `omitempty` (zeros,
/// `false`, empty strings, `null`, empty lists and objects), all the way down: the two
/// readings differ only in which of those they write.
fn written(value: &Value) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(name, v)| (name.clone(), written(v)))
                .filter(|(_, v)| !empty(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(written).collect()),
        other => other.clone(),
    }
}

fn empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(members) => members.is_empty(),
    }
}
