use bytes::Bytes;
use futures_util::stream::StreamExt;
use http_body::Frame;
use serde_json::{Value as Json, json};

use super::*;
use crate::stream::test_bodies::chunked;

fn pod(name: &str) -> Json {
    json!({
        "metadata": {"name": name, "namespace": "a", "resourceVersion": "7", "labels": {"app": name}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"}
    })
}

async fn collect(body: impl Stream<Item = Result<Frame<Bytes>, BoxError>>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.next().await {
        out.extend_from_slice(frame.unwrap().data_ref().unwrap());
    }
    out
}

fn partial(name: &str) -> Json {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": pod(name)["metadata"]})
}

#[test]
fn an_object_keeps_its_metadata_alone() {
    let mut object = pod("web");
    object["kind"] = "Pod".into();
    let partial_web: Json = serde_json::from_slice(&object_of(&object)).unwrap();
    assert_eq!(partial_web, partial("web"));
}

fn object_of(object: &Json) -> Bytes {
    super::object(&serde_json::to_vec(object).unwrap()).unwrap()
}

#[tokio::test]
async fn a_list_cut_anywhere_is_a_partial_object_metadata_list() {
    let items: Vec<Json> = (0..5).map(|i| pod(&format!("p-{i}"))).collect();
    let body = format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"9","continue":"c"}},"items":{}}}"#,
        Json::from(items)
    );
    let expected = json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": "9", "continue": "c"},
        "items": (0..5).map(|i| partial(&format!("p-{i}"))).collect::<Vec<_>>(),
    });
    for size in [1, 3, 100, body.len()] {
        let out = collect(super::list(chunked(body.as_bytes(), size))).await;
        let read: Json = serde_json::from_slice(&out).unwrap();
        assert_eq!(read, expected, "cut in pieces of {size}");
    }
    let empty =
        r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"3"},"items":[]}"#;
    let read: Json =
        serde_json::from_slice(&collect(super::list(chunked(empty.as_bytes(), 4))).await).unwrap();
    assert_eq!(read["items"], json!([]));
    assert_eq!(read["metadata"]["resourceVersion"], "3");
}

#[tokio::test]
async fn a_watch_cut_anywhere_has_metadata_alone_and_its_errors_as_they_were() {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired"});
    let events = [
        json!({"type": "ADDED", "object": pod("a")}),
        json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "12"}}}),
        json!({"type": "ERROR", "object": status}),
    ];
    let body: Vec<u8> = events
        .iter()
        .flat_map(|e| [serde_json::to_vec(e).unwrap(), b"\n".to_vec()].concat())
        .collect();
    for size in [1, 7, body.len()] {
        let out = collect(super::watch(chunked(&body, size))).await;
        let read: Vec<Json> = serde_json::Deserializer::from_slice(&out)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(read[0], json!({"type": "ADDED", "object": partial("a")}));
        assert_eq!(read[1]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(read[1]["object"]["metadata"]["resourceVersion"], "12");
        assert_eq!(read[2], events[2], "cut in pieces of {size}");
    }
}
