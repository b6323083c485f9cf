//! The fast static upstream: canned answers to the load harness's GET, LIST and watch, and to
//! what a gateway with filters asks on its own (its informers' Services and Nodes, its
//! node-lease heartbeat). Answers are built once, so the upstream costs next to nothing per
//! request and the proxy's overhead is not hidden behind apiserver time.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::fixtures::{
    NODE, NODE_LOCAL_SERVICE, PLAIN_SERVICE, bytes_of, endpoint_slice_v1beta1, service_to_create,
};
use crate::load::workload::{LIST_NAMESPACES, SENT_ANNOTATION, WATCH_NAMESPACE};

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Everything the upstream answers, built once.
pub struct Canned {
    small: Bytes,
    lists: Vec<(String, Bytes)>,
    services: Bytes,
    nodes: Bytes,
    /// A watch event line with `@RV@` and `@SENT@` where its resourceVersion and send time go.
    event: String,
    events_per_second: u32,
    resource_version: AtomicU64,
}

impl Canned {
    /// The canned answers; watches send `events_per_second` events each.
    pub fn new(events_per_second: u32) -> Canned {
        let lists = LIST_NAMESPACES
            .iter()
            .map(|(namespace, count)| {
                let items: Vec<Bytes> = (0..*count)
                    .map(|i| bytes_of(&slice(namespace, i)))
                    .collect();
                let body = crate::fixtures::list_body(
                    "EndpointSliceList",
                    "discovery.k8s.io/v1beta1",
                    items.iter().map(|b| &b[..]),
                );
                (
                    format!("/apis/discovery.k8s.io/v1beta1/namespaces/{namespace}/endpointslices"),
                    Bytes::from(body),
                )
            })
            .collect();
        let mut services = Vec::new();
        for namespace in LIST_NAMESPACES
            .iter()
            .map(|(ns, _)| *ns)
            .chain([WATCH_NAMESPACE])
        {
            services.push(service_to_create(
                namespace,
                NODE_LOCAL_SERVICE,
                Some("kubernetes.io/hostname"),
            ));
            services.push(service_to_create(namespace, PLAIN_SERVICE, None));
        }
        let node = json!({"metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}});
        let mut watched = slice(WATCH_NAMESPACE, 0);
        watched["metadata"]["resourceVersion"] = json!("@RV@");
        watched["metadata"]["annotations"][SENT_ANNOTATION] = json!("@SENT@");
        Canned {
            small: bytes_of(&small_config_map()),
            lists,
            services: list_of("ServiceList", "v1", services),
            nodes: list_of("NodeList", "v1", vec![node]),
            event: format!(
                "{{\"type\":\"MODIFIED\",\"object\":{}}}\n",
                String::from_utf8_lossy(&bytes_of(&watched))
            ),
            events_per_second: events_per_second.max(1),
            resource_version: AtomicU64::new(10_000),
        }
    }
}

/// Item `i` of a list namespace: half the slices belong to the Service whose topology keeps
/// only this node's endpoints, half to one without a topology.
fn slice(namespace: &str, i: usize) -> Value {
    let service = if i.is_multiple_of(2) {
        NODE_LOCAL_SERVICE
    } else {
        PLAIN_SERVICE
    };
    let mut slice = endpoint_slice_v1beta1(namespace, &format!("{service}-{i:06}"), service);
    slice["metadata"]["resourceVersion"] = json!((1_000 + i).to_string());
    slice["metadata"]["uid"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
    slice
}

/// The object of the small GET: a ConfigMap of a few hundred bytes.
fn small_config_map() -> Value {
    json!({
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "name": "small",
            "namespace": "bench",
            "uid": "00000000-0000-4000-8000-000000000001",
            "resourceVersion": "42",
            "creationTimestamp": "2021-03-02T08:11:40Z",
        },
        "data": {"config.yaml": "mode: iptables\nclusterCIDR: 10.244.0.0/16\n"},
    })
}

fn list_of(kind: &str, api_version: &str, items: Vec<Value>) -> Bytes {
    let text = json!({
        "kind": kind,
        "apiVersion": api_version,
        "metadata": {"resourceVersion": "4242"},
        "items": items,
    });
    Bytes::from(text.to_string())
}

impl Canned {
    /// The next watch event, stamped with its resourceVersion and the time it is written.
    fn event(&self) -> String {
        let rv = self.resource_version.fetch_add(1, Ordering::Relaxed);
        let sent = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        self.event
            .replacen("@RV@", &rv.to_string(), 1)
            .replacen("@SENT@", &sent.to_string(), 1)
    }
}

/// Serves `canned` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, canned: Arc<Canned>) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let canned = canned.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let canned = canned.clone();
                async move { Ok::<_, Infallible>(answer(&canned, &request)) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(canned: &Arc<Canned>, request: &Request<Incoming>) -> Response<Body> {
    let path = request.uri().path();
    let watching = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let method = request.method();
    if path.contains("/leases") {
        // The gateway's node-lease heartbeat: no lease yet, and creating one succeeds.
        return match *method {
            Method::GET => status(StatusCode::NOT_FOUND),
            _ => json_response(StatusCode::CREATED, Bytes::from_static(b"{}")),
        };
    }
    if method != Method::GET {
        return status(StatusCode::METHOD_NOT_ALLOWED);
    }
    match path {
        "/readyz" | "/healthz" | "/livez" => plain(Bytes::from_static(b"ok")),
        _ if path.starts_with("/api/v1/namespaces/bench/configmaps/") => {
            json_response(StatusCode::OK, canned.small.clone())
        }
        "/api/v1/services" | "/api/v1/nodes" if watching => idle_watch(),
        "/api/v1/services" => json_response(StatusCode::OK, canned.services.clone()),
        "/api/v1/nodes" => json_response(StatusCode::OK, canned.nodes.clone()),
        _ if watching && path.ends_with("/endpointslices") => events(canned.clone()),
        _ => match canned.lists.iter().find(|(p, _)| p == path) {
            Some((_, body)) => json_response(StatusCode::OK, body.clone()),
            None => status(StatusCode::NOT_FOUND),
        },
    }
}

fn json_response(code: StatusCode, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed_unsync());
    *response.status_mut() = code;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn plain(body: Bytes) -> Response<Body> {
    Response::new(Full::new(body).boxed_unsync())
}

fn status(code: StatusCode) -> Response<Body> {
    let reason = code.canonical_reason().unwrap_or_default();
    let body = edgegate::reply::failure_status(code.as_u16(), reason, reason);
    json_response(code, Bytes::from(body.to_string()))
}

/// A watch that sends nothing (the informers' Services and Nodes never change).
fn idle_watch() -> Response<Body> {
    let never = futures_util::stream::pending::<Result<Frame<Bytes>, Infallible>>();
    streaming(StreamBody::new(never).boxed_unsync())
}

/// A watch sending a MODIFIED event every 1/`events_per_second` s, each stamped with the
/// wall-clock time it was written (nanoseconds since the epoch) in [`SENT_ANNOTATION`].
fn events(canned: Arc<Canned>) -> Response<Body> {
    let period = Duration::from_nanos(1_000_000_000 / u64::from(canned.events_per_second));
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let stream = futures_util::stream::unfold((ticks, canned), |(mut ticks, canned)| async move {
        ticks.tick().await;
        let event = canned.event();
        Some((Ok(Frame::data(Bytes::from(event))), (ticks, canned)))
    });
    streaming(StreamBody::new(stream).boxed_unsync())
}

fn streaming(body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_events_are_one_json_line_each_stamped() {
        let canned = Canned::new(1000);
        let (first, second) = (canned.event(), canned.event());
        assert!(first.ends_with('\n') && !first.trim_end().contains('\n'));
        let event: Value = serde_json::from_str(&first).unwrap();
        let next: Value = serde_json::from_str(&second).unwrap();
        let rv = |e: &Value| {
            e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        assert_eq!(rv(&next), rv(&event) + 1);
        let sent = event["object"]["metadata"]["annotations"][SENT_ANNOTATION]
            .as_str()
            .unwrap();
        assert!(sent.parse::<u128>().unwrap() > 0);
    }
}
