//! The transcoder against kube-apiserver 1.20.2 itself: `recorded/` holds a protobuf watch
//! and a JSON watch of the same namespace, opened together while Services (ClusterIP with
//! named and numbered target ports, NodePort, ExternalName, headless, LoadBalancer) and
//! v1beta1 EndpointSlices (ready and not, topology, target references, an empty IPv6 one)
//! were created, labelled, annotated and deleted. The JSON the gateway makes of the first is
//! the second, event by event.

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use serde_json::Value;

use super::ProtobufBody;

/// `value` with the members that are `null` left out: kube-apiserver writes `null` for an
/// empty list without `omitempty`, which protobuf cannot carry, and the transcoder leaves it
/// out; a client decodes both to the same.
pub(super) fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

fn lines(bytes: &[u8]) -> Vec<Value> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| without_nulls(serde_json::from_slice(line).expect("a JSON event")))
        .collect()
}

async fn transcoded(protobuf: &'static [u8], resource: (&str, &str, &str)) -> Vec<Value> {
    // Cut where the network happened to: 1 000-byte reads.
    let chunks: Vec<Result<http_body::Frame<Bytes>, std::convert::Infallible>> = protobuf
        .chunks(1000)
        .map(|c| Ok(http_body::Frame::data(Bytes::from_static(c))))
        .collect();
    let upstream = StreamBody::new(futures_util::stream::iter(chunks));
    let (group, version, resource) = resource;
    let body = ProtobufBody::watch(upstream, group, version, resource);
    let json = body.collect().await.expect("the watch reads").to_bytes();
    lines(&json)
}

async fn same_as_the_json_watch(
    protobuf: &'static [u8],
    json: &[u8],
    resource: (&str, &str, &str),
    events: usize,
) {
    let expected = lines(json);
    let got = transcoded(protobuf, resource).await;
    assert_eq!(expected.len(), events, "the recording");
    assert_eq!(got.len(), expected.len(), "every event is read");
    for (got, expected) in got.iter().zip(&expected) {
        assert_eq!(got, expected);
    }
}

#[tokio::test]
async fn services_are_what_the_json_watch_sent() {
    same_as_the_json_watch(
        include_bytes!("recorded/services.pb"),
        include_bytes!("recorded/services.json"),
        ("", "v1", "services"),
        7,
    )
    .await;
}

#[tokio::test]
async fn v1beta1_endpoint_slices_are_what_the_json_watch_sent() {
    same_as_the_json_watch(
        include_bytes!("recorded/endpointslices-v1beta1.pb"),
        include_bytes!("recorded/endpointslices-v1beta1.json"),
        ("discovery.k8s.io", "v1beta1", "endpointslices"),
        4,
    )
    .await;
}
