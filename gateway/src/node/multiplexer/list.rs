//! A list answered from a shared state: the objects of the client's namespace its
//! selectors select, at the state's version, streamed in chunks (the objects are shared;
//! nothing of the answer is gathered whole).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, StreamBody};

use super::body::SharedBody;
use super::object::Object;
use super::state::ListType;
use crate::cache::Selectors;

/// A chunk of a list's body is sent once it holds this many bytes.
const CHUNK: usize = 64 * 1024;

/// The response to a list: `objects` (all of the client's namespace) narrowed by
/// `selectors`, as the list `list` at `version`.
pub(super) fn respond(
    list: &ListType,
    objects: Vec<Arc<Object>>,
    version: u64,
    selectors: Selectors,
) -> http::Response<SharedBody> {
    let head = serde_json::json!({
        "kind": list.kind,
        "apiVersion": list.api_version,
        "metadata": {"resourceVersion": version.to_string()},
    })
    .to_string();
    // `{…}` becomes `{…,"items":[`.
    let mut first = BytesMut::from(&head.as_bytes()[..head.len() - 1]);
    first.extend_from_slice(b",\"items\":[");
    let chunks = Chunks {
        objects: objects.into_iter(),
        selectors,
        pending: first,
        any: false,
        done: false,
    };
    let body = StreamBody::new(futures_util::stream::iter(
        chunks.map(|chunk| Ok::<_, Infallible>(http_body::Frame::data(chunk))),
    ));
    let mut response = http::Response::new(body.boxed_unsync());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The body's chunks, made as they are read.
struct Chunks {
    objects: std::vec::IntoIter<Arc<Object>>,
    selectors: Selectors,
    pending: BytesMut,
    /// An item was written (the next one needs a comma).
    any: bool,
    done: bool,
}

impl Iterator for Chunks {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        for object in self.objects.by_ref() {
            if !self.selectors.matches(&object.bytes) {
                continue;
            }
            if self.any {
                self.pending.extend_from_slice(b",");
            }
            self.any = true;
            self.pending.extend_from_slice(&object.bytes);
            if self.pending.len() >= CHUNK {
                return Some(self.pending.split().freeze());
            }
        }
        self.done = true;
        self.pending.extend_from_slice(b"]}");
        Some(self.pending.split().freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, app: &str) -> Arc<Object> {
        let json = format!(
            r#"{{"kind":"Service","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"n","resourceVersion":"3","labels":{{"app":"{app}"}}}},"pad":"{}"}}"#,
            "x".repeat(40_000)
        );
        Arc::new(Object::parse(Bytes::from(json)).unwrap())
    }

    fn read(objects: Vec<Arc<Object>>, labels: &str) -> (Vec<usize>, serde_json::Value) {
        let list = ListType {
            kind: "ServiceList".into(),
            api_version: "v1".into(),
        };
        let response = respond(&list, objects, 9, Selectors::new(labels, "").unwrap());
        let body = futures_executor_block_on(response.into_body());
        let sizes = body.iter().map(Bytes::len).collect();
        let whole: Vec<u8> = body.concat();
        (sizes, serde_json::from_slice(&whole).unwrap())
    }

    fn futures_executor_block_on(body: SharedBody) -> Vec<Bytes> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut body = body;
            let mut chunks = Vec::new();
            while let Some(frame) = body.frame().await {
                chunks.push(frame.unwrap().into_data().unwrap());
            }
            chunks
        })
    }

    #[test]
    fn a_list_is_the_selected_objects_at_the_states_version_in_chunks() {
        let objects = vec![
            object("a", "x"),
            object("b", "y"),
            object("c", "x"),
            object("d", "x"),
        ];
        let (sizes, list) = read(objects, "app=x");
        assert_eq!(list["kind"], "ServiceList");
        assert_eq!(list["metadata"]["resourceVersion"], "9");
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "c", "d"]);
        assert!(
            sizes.len() > 1,
            "streamed in more than one chunk: {sizes:?}"
        );
        assert!(sizes.iter().all(|s| *s < CHUNK + 50_000));
    }

    #[test]
    fn an_empty_selection_is_an_empty_list() {
        let (_, list) = read(vec![object("a", "x")], "app=z");
        assert_eq!(list["items"], serde_json::json!([]));
    }
}
