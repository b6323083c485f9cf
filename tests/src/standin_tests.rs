//! The stand-in's conversions against kube-apiserver 1.20.2 itself: the gateway's recording
//! of a JSON and a protobuf watch of the same v1beta1 EndpointSlices
//! (`gateway/src/stream/protobuf/recorded/`: topology with a hostname, a zone and a pool,
//! endpoints ready and not, target references, an empty IPv6 slice).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use crate::standin_json::WatchLines;
use crate::standin_proto::{MAGIC, WatchFrames, Wire, bytes_of, fields, object_to_v1, put};

const JSON: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../gateway/src/stream/protobuf/recorded/endpointslices-v1beta1.json"
));
const PROTOBUF: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../gateway/src/stream/protobuf/recorded/endpointslices-v1beta1.pb"
));

/// The recorded JSON watch made v1, fed in 1 000-byte reads; its lines.
fn json_v1() -> Vec<Vec<u8>> {
    let mut lines = WatchLines::default();
    let mut out = Vec::new();
    for chunk in JSON.chunks(1000) {
        lines.push(chunk);
        while let Some(line) = lines.next_line().expect("a recorded event converts") {
            out.push(line);
        }
    }
    out.extend(lines.finish().expect("the recording ends with a newline"));
    out
}

fn parse(line: &[u8]) -> Value {
    serde_json::from_slice(line).expect("JSON")
}

/// `value` without its `null` members (protobuf cannot carry an empty list without
/// `omitempty`, which kube-apiserver writes as `null` in JSON) and, if `empty`, without its
/// `""` ones (Go's protobuf writes an empty string its JSON leaves out).
fn without(value: Value, empty: bool) -> Value {
    match value {
        Value::Object(members) => members
            .into_iter()
            .filter(|(_, v)| !(v.is_null() || empty && *v == ""))
            .map(|(k, v)| (k, without(v, empty)))
            .collect(),
        Value::Array(items) => items.into_iter().map(|v| without(v, empty)).collect(),
        other => other,
    }
}

fn without_nulls(value: Value) -> Value {
    without(value, false)
}

#[test]
fn a_json_watch_is_made_v1_as_kube_apiserver_converts_it() {
    let recorded: Vec<&[u8]> = JSON.split_inclusive(|b| *b == b'\n').collect();
    let converted = json_v1();
    assert_eq!(converted.len(), 4, "every recorded event");
    for (before, after) in recorded.iter().zip(&converted) {
        let (mut before, after) = (parse(before), parse(after));
        assert_eq!(after["object"]["apiVersion"], "discovery.k8s.io/v1");
        before["object"]["apiVersion"] = json!("discovery.k8s.io/v1");
        // Each endpoint as the conversion makes it, written out by hand.
        for endpoint in before["object"]["endpoints"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            let Some(Value::Object(mut topology)) =
                endpoint.as_object_mut().and_then(|e| e.remove("topology"))
            else {
                continue;
            };
            if let Some(node) = topology.remove("kubernetes.io/hostname") {
                endpoint["nodeName"] = node;
            }
            if let Some(zone) = topology.remove("topology.kubernetes.io/zone") {
                endpoint["zone"] = zone;
            }
            if !topology.is_empty() {
                endpoint["deprecatedTopology"] = Value::Object(topology);
            }
        }
        assert_eq!(before, after);
    }
    // The first endpoint of the first event, byte for byte in the v1 struct's order.
    let first = String::from_utf8(converted[0].clone()).expect("UTF-8");
    assert!(
        first.contains(r#""uid":"aaaa-bbbb","resourceVersion":"1234"},"deprecatedTopology":{"openyurt.io/nodepool":"pool-a"},"nodeName":"node-a","zone":"z1"},{"addresses":["198.18.0.11","198.18.0.12"],"conditions":{"ready":false},"nodeName":"node-b"}]"#),
        "{first}"
    );
    // Everything before the endpoints is kube-apiserver's own bytes.
    let (head, _) = first.split_once(r#""endpoints""#).expect("endpoints");
    let recorded_head =
        String::from_utf8_lossy(recorded[0]).replace("/v1beta1\",\"metadata", "/v1\",\"metadata");
    assert!(recorded_head.starts_with(head), "{head}");
}

#[tokio::test]
async fn a_protobuf_watch_made_v1_reads_as_the_json_one_made_v1() {
    let mut frames = WatchFrames::default();
    let mut v1 = Vec::new();
    for chunk in PROTOBUF.chunks(1000) {
        frames.push(chunk);
        while let Some(frame) = frames.next_frame().expect("a recorded frame converts") {
            v1.extend_from_slice(&frame);
        }
    }
    frames.finish().expect("the recording ends on a frame");
    let expected: Vec<Value> = json_v1().iter().map(|l| without_nulls(parse(l))).collect();

    // As the gateway reads a v1 watch, by its own tables.
    let body = edgegate::stream::ProtobufBody::watch(
        Full::new(Bytes::from(v1.clone())),
        "discovery.k8s.io",
        "v1",
        "endpointslices",
    );
    let json = body
        .collect()
        .await
        .expect("the gateway reads it")
        .to_bytes();
    let read: Vec<Value> = json
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| without_nulls(parse(l)))
        .collect();
    assert_eq!(read, expected);

    // Each object as Kubernetes' own .proto schema of discovery/v1 reads it.
    let objects = objects(&v1);
    assert_eq!(objects.len(), 4);
    for (object, expected) in objects.iter().zip(&expected) {
        let object = edgegate::stream::protobuf_object_json(object)
            .expect("the schema of discovery/v1 reads it");
        let want = without(expected["object"].clone(), true);
        assert_eq!(without(object, true), want);
    }
}

/// The objects (`k8s\0` and a `runtime.Unknown`) of a protobuf watch's frames.
fn objects(watch: &[u8]) -> Vec<Vec<u8>> {
    let field = |bytes, tag| {
        let fields = fields(bytes).expect("fields");
        let (_, value) = fields
            .into_iter()
            .find(|(t, _)| *t == tag)
            .expect("the field");
        bytes_of(value, "a field").expect("bytes")
    };
    let (mut at, mut objects) = (0, Vec::new());
    while at < watch.len() {
        let len = u32::from_be_bytes(watch[at..at + 4].try_into().expect("4 bytes")) as usize;
        let event = &watch[at + 4..at + 4 + len];
        at += 4 + len;
        // WatchEvent 2 object: RawExtension 1 raw.
        objects.push(field(field(event, 2), 1).to_vec());
    }
    objects
}

/// `value` without its `kind` and `apiVersion` (a list's items carry none in protobuf).
fn untyped(value: Value) -> Value {
    let mut value = without(value, true);
    if let Value::Object(members) = &mut value {
        members.retain(|k, _| k != "kind" && k != "apiVersion");
    }
    value
}

#[test]
fn a_protobuf_list_made_v1_reads_as_its_objects_made_v1() {
    // The recorded watch's slices (each `runtime.Unknown`'s 2: the message) as the list
    // kube-apiserver would send of them: ListMeta {2 resourceVersion: "300"}, 2 items.
    let mut list = Vec::new();
    put(&mut list, 1, Wire::Bytes(&[0x12, 3, b'3', b'0', b'0']));
    let objects = objects(PROTOBUF);
    for object in &objects {
        let unknown = fields(&object[MAGIC.len()..]).expect("an Unknown");
        let (_, raw) = unknown.into_iter().find(|(t, _)| *t == 2).expect("raw");
        put(&mut list, 2, raw);
    }
    let mut type_meta = Vec::new();
    put(&mut type_meta, 1, Wire::Bytes(b"discovery.k8s.io/v1beta1"));
    put(&mut type_meta, 2, Wire::Bytes(b"EndpointSliceList"));
    let mut body = MAGIC.to_vec();
    put(&mut body, 1, Wire::Bytes(&type_meta));
    put(&mut body, 2, Wire::Bytes(&list));
    put(&mut body, 3, Wire::Bytes(b""));
    put(&mut body, 4, Wire::Bytes(b""));

    let v1 = object_to_v1(&body).expect("the list converts");
    let read = edgegate::stream::protobuf_object_json(&v1).expect("the schema reads a v1 list");
    assert_eq!(read["apiVersion"], "discovery.k8s.io/v1");
    assert_eq!(read["metadata"]["resourceVersion"], "300");
    let items = read["items"].as_array().expect("items");
    let expected: Vec<Value> = json_v1()
        .iter()
        .map(|l| parse(l)["object"].clone())
        .collect();
    assert_eq!(items.len(), expected.len());
    for (item, expected) in items.iter().zip(expected) {
        assert_eq!(untyped(item.clone()), untyped(expected));
    }
}
