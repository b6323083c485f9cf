use http_body_util::{BodyExt, StreamBody};
use serde_json::{Value, json};

use super::*;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field.
fn bytes(tag: u32, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, u64::from(tag << 3 | 2));
    varint(&mut out, value.len() as u64);
    out.extend_from_slice(value);
    out
}

fn text(tag: u32, value: &str) -> Vec<u8> {
    bytes(tag, value.as_bytes())
}

fn number(tag: u32, value: i64) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, u64::from(tag << 3));
    varint(&mut out, value as u64);
    out
}

fn message(fields: &[Vec<u8>]) -> Vec<u8> {
    fields.concat()
}

fn entry(tag: u32, key: &str, value: &str) -> Vec<u8> {
    bytes(tag, &message(&[text(1, key), text(2, value)]))
}

/// A watch frame: its length and a `WatchEvent` of `kind` holding `object` in its envelope.
fn frame(kind: &str, api_version: &str, object_kind: &str, object: &[u8]) -> Vec<u8> {
    let unknown = message(&[
        bytes(1, &message(&[text(1, api_version), text(2, object_kind)])),
        bytes(2, object),
        text(3, ""),
        text(4, ""),
    ]);
    let raw = [MAGIC, &unknown].concat();
    let event = message(&[text(1, kind), bytes(2, &bytes(1, &raw))]);
    let mut out = (event.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&event);
    out
}

fn meta(name: &str, version: &str) -> Vec<u8> {
    message(&[
        text(1, name),
        text(2, ""),
        text(3, "default"),
        text(5, "uid-1"),
        text(6, version),
        number(7, 0),
        bytes(8, &number(1, 1_764_000_000)),
        entry(11, "app", "web"),
        entry(11, "tier", "front"),
        bytes(
            17,
            &message(&[
                text(1, "kube-controller-manager"),
                text(2, "Update"),
                text(3, "discovery.k8s.io/v1beta1"),
                bytes(4, &message(&[number(1, 1_764_000_000), number(2, 5)])),
                text(6, "FieldsV1"),
                bytes(7, &text(1, r#"{"f:endpoints":{}}"#)),
            ]),
        ),
    ])
}

fn slice(version: &str) -> Vec<u8> {
    let endpoint = |address: &str, ready: bool| {
        bytes(
            2,
            &message(&[
                text(1, address),
                bytes(2, &number(1, i64::from(ready))),
                bytes(4, &message(&[text(1, "Pod"), text(3, "web-1")])),
                entry(5, "kubernetes.io/hostname", "node-a"),
                text(6, "node-a"),
            ]),
        )
    };
    message(&[
        bytes(1, &meta("web-abc", version)),
        endpoint("198.18.0.1", true),
        endpoint("198.18.0.2", false),
        bytes(
            3,
            &message(&[text(1, "http"), text(2, "TCP"), number(3, 8080)]),
        ),
        text(4, "IPv4"),
    ])
}

fn transcode(frames: &[u8], resource: Option<&Known>) -> Result<Vec<Value>, TranscodeError> {
    let mut out = Vec::new();
    let mut rest = frames;
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        event(&mut out, &rest[4..4 + len], resource)?;
        rest = &rest[4 + len..];
    }
    Ok(out
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect())
}

const V1BETA1: &Known = &KNOWN[2];

#[test]
fn an_endpoint_slice_event_is_the_json_kube_apiserver_writes() {
    let frames = frame(
        "MODIFIED",
        "discovery.k8s.io/v1beta1",
        "EndpointSlice",
        &slice("42"),
    );
    let events = transcode(&frames, Some(V1BETA1)).unwrap();
    assert_eq!(
        events,
        [json!({
            "type": "MODIFIED",
            "object": {
                "kind": "EndpointSlice",
                "apiVersion": "discovery.k8s.io/v1beta1",
                "metadata": {
                    // An empty `generateName` and a zero `generation` left out, as Go's
                    // JSON leaves them out.
                    "name": "web-abc",
                    "namespace": "default",
                    "uid": "uid-1",
                    "resourceVersion": "42",
                    "creationTimestamp": "2025-11-24T16:00:00Z",
                    "labels": {"app": "web", "tier": "front"},
                    "managedFields": [{
                        "manager": "kube-controller-manager",
                        "operation": "Update",
                        "apiVersion": "discovery.k8s.io/v1beta1",
                        "time": "2025-11-24T16:00:00Z",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:endpoints": {}},
                    }],
                },
                "addressType": "IPv4",
                "endpoints": [
                    {
                        "addresses": ["198.18.0.1"],
                        "conditions": {"ready": true},
                        "targetRef": {"kind": "Pod", "name": "web-1"},
                        "topology": {"kubernetes.io/hostname": "node-a"},
                        "nodeName": "node-a",
                    },
                    {
                        "addresses": ["198.18.0.2"],
                        // A pointer set to false is on the wire, and so in the JSON.
                        "conditions": {"ready": false},
                        "targetRef": {"kind": "Pod", "name": "web-1"},
                        "topology": {"kubernetes.io/hostname": "node-a"},
                        "nodeName": "node-a",
                    },
                ],
                "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
            }
        })]
    );
    // `kind` and `apiVersion` first, the rest in the Go struct's order.
    let mut out = Vec::new();
    event(&mut out, &frames[4..], Some(V1BETA1)).unwrap();
    let line = String::from_utf8(out).unwrap();
    assert!(
        line.starts_with(
            r#"{"type":"MODIFIED","object":{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1beta1","metadata":{"name":"web-abc""#
        ),
        "{line}"
    );
    assert!(line.find(r#""addressType""#) < line.find(r#""endpoints":["#));
    assert!(line.ends_with("}}\n"));
}

#[test]
fn a_service_with_both_kinds_of_target_port_and_a_zero_time() {
    let port = |name: &str, target: Vec<u8>| {
        bytes(
            1,
            &message(&[text(1, name), number(3, 80), bytes(4, &target)]),
        )
    };
    let service = message(&[
        bytes(1, &message(&[text(1, "web"), bytes(8, &[])])),
        bytes(
            2,
            &message(&[
                port("a", message(&[number(1, 0), number(2, 8080)])),
                port("b", message(&[number(1, 1), text(3, "http")])),
                text(3, "10.96.0.10"),
                text(4, "ClusterIP"),
                number(12, -1),
            ]),
        ),
        bytes(3, &bytes(1, &[])),
    ]);
    let events = transcode(&frame("ADDED", "v1", "Service", &service), Some(&KNOWN[0])).unwrap();
    assert_eq!(
        events[0]["object"],
        json!({
            "kind": "Service",
            "apiVersion": "v1",
            "metadata": {"name": "web", "creationTimestamp": null},
            "spec": {
                "ports": [
                    {"name": "a", "port": 80, "targetPort": 8080},
                    {"name": "b", "port": 80, "targetPort": "http"},
                ],
                "clusterIP": "10.96.0.10",
                "type": "ClusterIP",
                "healthCheckNodePort": -1,
            },
            "status": {"loadBalancer": {}},
        })
    );
}

#[test]
fn an_error_event_carries_its_status() {
    let status = message(&[
        bytes(1, &[]),
        text(2, "Failure"),
        text(3, "too old resource version: 1 (42)"),
        text(4, "Expired"),
        number(6, 410),
    ]);
    let events = transcode(&frame("ERROR", "v1", "Status", &status), Some(V1BETA1)).unwrap();
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
}

#[test]
fn what_it_does_not_know_is_an_error_that_names_it() {
    let mut newer = slice("1");
    newer.extend(text(9, "a field of a later release"));
    let frames = frame("ADDED", "discovery.k8s.io/v1beta1", "EndpointSlice", &newer);
    assert!(matches!(
        transcode(&frames, Some(V1BETA1)),
        Err(TranscodeError::UnknownField {
            message: "EndpointSlice",
            tag: 9
        })
    ));
    // An object of another resource than the watch's.
    let frames = frame("ADDED", "discovery.k8s.io/v1", "EndpointSlice", &slice("1"));
    assert!(matches!(
        transcode(&frames, Some(V1BETA1)),
        Err(TranscodeError::UnknownKind(_))
    ));
    // Cut short, or a string that is not UTF-8.
    let mut cut = frame(
        "ADDED",
        "discovery.k8s.io/v1beta1",
        "EndpointSlice",
        &slice("1"),
    );
    cut.truncate(cut.len() - 3);
    let len = (cut.len() - 4) as u32;
    cut[..4].copy_from_slice(&len.to_be_bytes());
    assert!(matches!(
        transcode(&cut, Some(V1BETA1)),
        Err(TranscodeError::Malformed(_))
    ));
    // A string of the object that is not UTF-8 is written as Go's JSON writes it; a kind that
    // is not, is an error.
    let bad = message(&[bytes(1, &bytes(1, b"web-\xff"))]);
    let frames = frame("ADDED", "discovery.k8s.io/v1beta1", "EndpointSlice", &bad);
    let events = transcode(&frames, Some(V1BETA1)).unwrap();
    assert_eq!(events[0]["object"]["metadata"]["name"], "web-\u{fffd}");
    let frames = frame(
        "ADDED",
        "discovery.k8s.io/v1beta1",
        "Endpoint\u{0}Slice",
        &bad,
    );
    assert!(matches!(
        transcode(&frames, Some(V1BETA1)),
        Err(TranscodeError::UnknownKind(_))
    ));
    let mut not_utf8 = frame("ADDED", "v1", "Service", &[]);
    let at = not_utf8.windows(7).position(|w| w == b"Service").unwrap();
    not_utf8[at] = 0xff;
    assert!(matches!(
        transcode(&not_utf8, Some(&KNOWN[0])),
        Err(TranscodeError::NotUtf8)
    ));
    // managedFields' JSON that is not UTF-8 would make the line no JSON at all.
    let fields = bytes(17, &bytes(7, &bytes(1, b"{\"f:a\xd2\":{}}")));
    let bad = message(&[bytes(1, &[text(1, "web"), fields].concat())]);
    let frames = frame("ADDED", "discovery.k8s.io/v1beta1", "EndpointSlice", &bad);
    assert!(matches!(
        transcode(&frames, Some(V1BETA1)),
        Err(TranscodeError::NotJson)
    ));
}

/// `chunks` as a body, each chunk a data frame.
fn body(chunks: Vec<Vec<u8>>) -> impl Body<Data = Bytes, Error = BoxError> + Unpin {
    StreamBody::new(futures_util::stream::iter(
        chunks
            .into_iter()
            .map(|c| Ok::<_, BoxError>(Frame::data(Bytes::from(c)))),
    ))
}

async fn read_all(
    mut body: impl Body<Data = Bytes, Error = BoxError> + Unpin,
) -> (Vec<u8>, Option<BoxError>) {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => out.extend_from_slice(&frame.into_data().unwrap()),
            Err(error) => return (out, Some(error)),
        }
    }
    (out, None)
}

#[tokio::test]
async fn the_body_is_the_same_however_it_is_cut() {
    let frames = [
        frame(
            "ADDED",
            "discovery.k8s.io/v1beta1",
            "EndpointSlice",
            &slice("1"),
        ),
        frame(
            "MODIFIED",
            "discovery.k8s.io/v1beta1",
            "EndpointSlice",
            &slice("2"),
        ),
    ]
    .concat();
    let whole = ProtobufBody::watch(
        body(vec![frames.clone()]),
        "discovery.k8s.io",
        "v1beta1",
        "endpointslices",
    );
    let (whole, error) = read_all(whole).await;
    assert!(error.is_none());
    assert_eq!(whole.iter().filter(|b| **b == b'\n').count(), 2);
    let bytewise = ProtobufBody::watch(
        body(frames.iter().map(|b| vec![*b]).collect()),
        "discovery.k8s.io",
        "v1beta1",
        "endpointslices",
    );
    assert_eq!(read_all(bytewise).await.0, whole);
    // Ended within an event: an error, after the whole events.
    let cut = ProtobufBody::watch(
        body(vec![frames[..frames.len() - 1].to_vec()]),
        "discovery.k8s.io",
        "v1beta1",
        "endpointslices",
    );
    let (out, error) = read_all(cut).await;
    assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 1);
    assert!(matches!(
        error.unwrap().downcast_ref::<TranscodeError>(),
        Some(TranscodeError::CutShort)
    ));
}

#[tokio::test]
async fn an_event_too_large_is_refused_before_it_is_read() {
    let head = ((MAX_OBJECT + 1) as u32).to_be_bytes().to_vec();
    let watch = ProtobufBody::watch(body(vec![head]), "", "v1", "services");
    let (out, error) = read_all(watch).await;
    assert!(out.is_empty());
    assert!(matches!(
        error.unwrap().downcast_ref::<TranscodeError>(),
        Some(TranscodeError::TooLarge(_))
    ));
}

#[tokio::test]
async fn a_newer_cluster_ends_the_watch_cleanly_and_is_watched_as_json_after() {
    // The `v1` EndpointSlices: no other test asks for them.
    let resource = ("discovery.k8s.io", "v1", "endpointslices");
    assert!(watch_accept(resource.0, resource.1, resource.2).is_some());
    let mut newer = slice("2");
    newer.extend(text(9, "a field of a later release"));
    let frames = [
        frame("ADDED", "discovery.k8s.io/v1", "EndpointSlice", &slice("1")),
        frame("MODIFIED", "discovery.k8s.io/v1", "EndpointSlice", &newer),
    ]
    .concat();
    let watch = ProtobufBody::watch(body(vec![frames]), resource.0, resource.1, resource.2);
    let (out, error) = read_all(watch).await;
    assert!(error.is_none(), "{error:?}");
    // The event before it went through; the one it could not read did not.
    assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 1);
    assert!(watch_accept(resource.0, resource.1, resource.2).is_none());
    assert!(watch_accept("", "v1", "services").is_some());
    assert!(watch_accept("", "v1", "pods").is_none());
}

#[test]
fn only_a_broken_stream_keeps_the_resource_on_protobuf() {
    assert!(TranscodeError::Malformed("varint").refuses_protobuf());
    assert!(TranscodeError::NotUtf8.refuses_protobuf());
    assert!(
        TranscodeError::UnknownField {
            message: "Service",
            tag: 99
        }
        .refuses_protobuf()
    );
    assert!(!TranscodeError::CutShort.refuses_protobuf());
    assert!(!TranscodeError::TooLarge(1 << 30).refuses_protobuf());
}

#[test]
fn only_protobuf_watch_streams_are_taken_for_one() {
    let headers = |value: &str| {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, value.parse().unwrap());
        headers
    };
    assert!(is_protobuf_watch(&headers(
        "application/vnd.kubernetes.protobuf;stream=watch"
    )));
    assert!(!is_protobuf_watch(&headers(
        "application/vnd.kubernetes.protobuf"
    )));
    assert!(!is_protobuf_watch(&headers("application/json")));
}

#[tokio::test]
async fn a_refused_watchs_status_is_json() {
    let status = message(&[
        bytes(1, &[]),
        text(2, "Failure"),
        text(3, "too old resource version"),
        text(4, "Expired"),
        number(6, 410),
    ]);
    let unknown = message(&[
        bytes(1, &message(&[text(1, "v1"), text(2, "Status")])),
        bytes(2, &status),
    ]);
    let whole = [MAGIC, &unknown].concat();
    let chunks = whole.chunks(5).map(<[u8]>::to_vec).collect();
    let (out, error) = read_all(ProtobufBody::status(body(chunks))).await;
    assert!(error.is_none(), "{error:?}");
    let json: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        json,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "too old resource version", "reason": "Expired", "code": 410})
    );
    // Not a Status: an error, not bytes the client cannot read.
    let service = message(&[
        bytes(1, &message(&[text(1, "v1"), text(2, "Service")])),
        bytes(2, &[]),
    ]);
    let (out, error) = read_all(ProtobufBody::status(body(vec![[MAGIC, &service].concat()]))).await;
    assert!(out.is_empty());
    assert!(error.is_some());
}

#[test]
fn a_protobuf_object_is_not_a_watch_stream() {
    let mut headers = HeaderMap::new();
    headers.insert(
        CONTENT_TYPE,
        "application/vnd.kubernetes.protobuf".parse().unwrap(),
    );
    assert!(is_protobuf_object(&headers));
    headers.insert(
        CONTENT_TYPE,
        "application/vnd.kubernetes.protobuf;stream=watch"
            .parse()
            .unwrap(),
    );
    assert!(!is_protobuf_object(&headers));
}
