use http_body_util::{BodyExt, StreamBody};
use serde_json::json;

use super::*;
use crate::stream::test_bodies::chunked;
use crate::stream::{ProtobufBody, protobuf_object_json};

fn service(name: &str, version: u64) -> Json {
    json!({
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": format!("uid-{name}"),
            "resourceVersion": version.to_string(),
            "creationTimestamp": "2026-12-06T05:00:00Z",
            "labels": {"app": name}
        },
        "spec": {
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}],
            "clusterIP": "198.19.128.10",
            "type": "ClusterIP",
            "sessionAffinity": "None"
        },
        "status": {"loadBalancer": {}}
    })
}

fn typed(mut object: Json) -> Json {
    object["apiVersion"] = "v1".into();
    object["kind"] = "Service".into();
    object
}

async fn collect(
    body: impl Stream<Item = Result<Frame<Bytes>, BoxError>> + Send + 'static,
) -> Vec<u8> {
    let body = BodyExt::collect(StreamBody::new(body)).await.expect("body");
    body.to_bytes().to_vec()
}

#[test]
fn an_object_reads_back_as_it_was() {
    let object = typed(service("web", 7));
    let written = super::object(&serde_json::to_vec(&object).unwrap()).unwrap();
    assert_eq!(protobuf_object_json(&written).unwrap(), object);
}

#[test]
fn a_kind_the_schema_does_not_know_is_not_acceptable() {
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}});
    let refused = super::object(&serde_json::to_vec(&widget).unwrap()).unwrap_err();
    assert!(
        matches!(refused, ProtobufReplyError::NotAcceptable(_)),
        "{refused}"
    );
}

/// A list cut anywhere is spooled and sent as kube-apiserver sends it: it reads back as the
/// JSON list it was, its `Content-Length` its length.
#[tokio::test]
async fn a_list_cut_anywhere_reads_back_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let metadata = json!({"resourceVersion": "900", "continue": "abc", "remainingItemCount": 4});
    let items: Vec<Json> = (0..40)
        .map(|i| service(&format!("s-{i}"), 100 + i))
        .collect();
    // In kube-apiserver's order: kind, apiVersion and metadata before the items.
    let bytes = format!(
        r#"{{"kind":"ServiceList","apiVersion":"v1","metadata":{metadata},"items":{}}}"#,
        Json::from(items.clone())
    )
    .into_bytes();
    for size in [1, 7, 4096, bytes.len()] {
        let spooled = super::list(chunked(&bytes, size), dir.path())
            .await
            .unwrap();
        let length = spooled.length;
        let written = collect(spooled.body).await;
        assert_eq!(written.len() as u64, length);
        let read = protobuf_object_json(&written).unwrap();
        assert_eq!(read["kind"], "ServiceList");
        assert_eq!(read["metadata"], metadata);
        assert_eq!(
            read["items"],
            Json::from(items.clone()),
            "cut in pieces of {size}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "spools unlinked"
    );
}

#[tokio::test]
async fn an_empty_list_is_a_list() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = br#"{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}"#;
    let spooled = super::list(chunked(bytes, 10), dir.path()).await.unwrap();
    let read = protobuf_object_json(&collect(spooled.body).await).unwrap();
    assert_eq!(read["metadata"]["resourceVersion"], "5");
    assert!(read.get("items").is_none_or(|items| items == &json!([])));
}

#[tokio::test]
async fn a_list_that_breaks_off_or_names_its_kind_late_is_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let bodies: [&[u8]; 2] = [
        br#"{"kind":"ServiceList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"#,
        br#"{"items":[{"metadata":{"name":"a"}}],"kind":"ServiceList","apiVersion":"v1"}"#,
    ];
    for body in bodies {
        let broken = super::list(chunked(body, 9), dir.path()).await;
        assert!(matches!(broken, Err(ProtobufReplyError::Unreadable(_))));
    }
}

/// A JSON watch cut anywhere becomes the protobuf watch kube-apiserver sends: read by the
/// gateway's own protobuf reader, it is the JSON watch it was, bookmark and error included.
#[tokio::test]
async fn a_watch_cut_anywhere_reads_back_as_it_was() {
    let events = [
        json!({"type": "ADDED", "object": typed(service("a", 10))}),
        json!({"type": "MODIFIED", "object": typed(service("a", 11))}),
        json!({"type": "BOOKMARK", "object": {"kind": "Service", "apiVersion": "v1",
            "metadata": {"resourceVersion": "12"}}}),
        json!({"type": "DELETED", "object": typed(service("a", 13))}),
    ];
    let mut body = Vec::new();
    for event in &events {
        body.extend_from_slice(&serde_json::to_vec(event).unwrap());
        body.push(b'\n');
    }
    for size in [1, 5, 333, body.len()] {
        let written = collect(super::watch(chunked(&body, size))).await;
        let upstream = http_body_util::Full::new(Bytes::from(written));
        let json = ProtobufBody::watch(upstream, "", "v1", "services");
        let json = BodyExt::collect(json).await.expect("read back").to_bytes();
        let read: Vec<Json> = serde_json::Deserializer::from_slice(&json)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(read.len(), events.len(), "cut in pieces of {size}");
        for (read, sent) in read.iter().zip(&events) {
            assert_eq!(read["type"], sent["type"]);
            assert_eq!(
                read["object"]["metadata"]["resourceVersion"],
                sent["object"]["metadata"]["resourceVersion"]
            );
        }
        assert_eq!(read[1]["object"], events[1]["object"]);
    }
}

#[tokio::test]
async fn a_watch_event_the_schema_cannot_write_ends_the_watch() {
    let body = concat!(
        r#"{"type":"ADDED","object":{"apiVersion":"example.com/v1","kind":"Widget","metadata":{}}}"#,
        "\n",
        r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Service","metadata":{"name":"b"}}}"#,
    );
    let mut watch = Box::pin(super::watch(chunked(body.as_bytes(), 8)));
    assert!(watch.next().await.expect("an item").is_err());
    assert!(watch.next().await.is_none(), "nothing after the error");
}
