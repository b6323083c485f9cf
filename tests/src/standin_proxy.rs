//! The stand-in's requests: discovery documents and `discovery.k8s.io/v1` EndpointSlice
//! reads made from the real apiserver's answers, everything else passed through as it is.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use bytes::Bytes;
use http::header::{
    ACCEPT, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderMap,
    HeaderValue,
};
use http::{Method, Request, Response, StatusCode, Version};
use http_body_util::combinators::{BoxBody, UnsyncBoxBody};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;

use crate::standin::Counters;
use crate::standin_discovery::Document;
use crate::standin_json::{self, WatchLines};
use crate::standin_proto::{self, WatchFrames};

/// A body of the stand-in's answers.
pub(crate) type Body = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;
/// A client of the real apiserver.
pub(crate) type Upstream = Client<HttpsConnector<HttpConnector>, BoxBody<Bytes, hyper::Error>>;

/// Where `v1` EndpointSlice paths begin.
const V1_PATH: &str = "/apis/discovery.k8s.io/v1/";
/// Kubernetes' protobuf media type.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// What the stand-in needs to answer a request.
pub(crate) struct Apiserver {
    /// The real apiserver's URL.
    pub base: String,
    /// Its client on the gateway's certificate, for requests without credentials of their own.
    pub own: Upstream,
    /// Its client without one, for requests with an `Authorization` (kube-apiserver would
    /// take the certificate before the token).
    pub bare: Upstream,
    /// What the stand-in answered.
    pub counters: Arc<Counters>,
}

/// Answers `request`; a failure is a `502` with a `Status`.
pub(crate) async fn handle(
    apiserver: Arc<Apiserver>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    Ok(answer(&apiserver, request).await.unwrap_or_else(|error| {
        eprintln!("the v1 EndpointSlice stand-in failed: {error:#}");
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("stand-in: {error:#}"), "reason": "InternalError", "code": 502,
        });
        let mut response = Response::new(full(status.to_string().into_bytes()));
        *response.status_mut() = StatusCode::BAD_GATEWAY;
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    }))
}

async fn answer(apiserver: &Apiserver, request: Request<Incoming>) -> Result<Response<Body>> {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().map(|q| format!("?{q}"));
    let query = query.unwrap_or_default();
    let get = request.method() == Method::GET;
    if let (true, Some(document)) = (get, Document::of(&path)) {
        let source = format!("{}{query}", document.source());
        let (mut parts, body) = send(apiserver, request, &source, true).await?.into_parts();
        let body = body.collect().await?.to_bytes();
        if !parts.status.is_success() {
            return Ok(Response::from_parts(parts, full(body.to_vec())));
        }
        apiserver.counters.discovery.fetch_add(1, Ordering::Relaxed);
        parts.headers.remove(CONTENT_LENGTH);
        return Ok(Response::from_parts(parts, full(document.rewrite(&body)?)));
    }
    let Some(rest) = path.strip_prefix(V1_PATH).filter(|_| get) else {
        let response = send(apiserver, request, &format!("{path}{query}"), false).await?;
        return Ok(response.map(|body| body.map_err(Into::into).boxed_unsync()));
    };
    // `watch` read as Go's strconv.ParseBool reads it.
    let truth = ["1", "t", "T", "TRUE", "true", "True"];
    let watch = rest.starts_with("watch/")
        || query.trim_start_matches('?').split('&').any(|pair| {
            pair.strip_prefix("watch=")
                .is_some_and(|value| truth.contains(&value))
        });
    let source = format!("/apis/discovery.k8s.io/v1beta1/{rest}{query}");
    let (mut parts, body) = send(apiserver, request, &source, false).await?.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    let media = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let counters = &apiserver.counters;
    let body = match (
        media.starts_with(PROTOBUF),
        media.starts_with("application/json"),
    ) {
        (true, _) if media.contains("stream=watch") => {
            counters.protobuf_watches.fetch_add(1, Ordering::Relaxed);
            streamed(body, WatchFrames::default(), counters.clone())
        }
        (true, _) => {
            counters.protobuf_answers.fetch_add(1, Ordering::Relaxed);
            full(standin_proto::object_to_v1(
                &body.collect().await?.to_bytes(),
            )?)
        }
        (_, true) if watch && parts.status.is_success() => {
            counters.json_watches.fetch_add(1, Ordering::Relaxed);
            streamed(body, WatchLines::default(), counters.clone())
        }
        (_, true) => {
            counters.json_answers.fetch_add(1, Ordering::Relaxed);
            full(standin_json::object_to_v1(
                &body.collect().await?.to_bytes(),
            )?)
        }
        _ => body.map_err(Into::into).boxed_unsync(),
    };
    Ok(Response::from_parts(parts, body))
}

/// Sends `request` to the real apiserver at `path_and_query`, asking for JSON if `json`;
/// the answer's body never compressed, so that the stand-in can read it as it comes.
async fn send(
    apiserver: &Apiserver,
    request: Request<Incoming>,
    path_and_query: &str,
    json: bool,
) -> Result<Response<Incoming>> {
    let (mut parts, body) = request.into_parts();
    parts.uri = format!("{}{path_and_query}", apiserver.base)
        .parse()
        .context("the upstream URI")?;
    // The client speaks HTTP/1.1 upstream, whatever reached the stand-in.
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(HOST);
    parts.headers.remove(ACCEPT_ENCODING);
    if json {
        parts
            .headers
            .insert(ACCEPT, HeaderValue::from_static("application/json"));
    }
    let client = match parts.headers.contains_key(AUTHORIZATION) {
        true => &apiserver.bare,
        false => &apiserver.own,
    };
    let request = Request::from_parts(parts, body.boxed());
    let mut response = client.request(request).await.context("the apiserver")?;
    apiserver.counters.forwarded.fetch_add(1, Ordering::Relaxed);
    strip_hop_by_hop(response.headers_mut());
    Ok(response)
}

/// Headers of one connection, not of the request (RFC 9110 §7.6.1).
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "te",
        "trailer",
    ] {
        headers.remove(name);
    }
}

fn full(bytes: Vec<u8>) -> Body {
    Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A watch's framing: bytes in, whole events out made `v1`.
trait Framing: Send + 'static {
    /// Whether its events are protobuf (else JSON), for the counters.
    const PROTOBUF: bool;
    fn push(&mut self, data: &[u8]);
    fn next_event(&mut self) -> Result<Option<Vec<u8>>>;
    fn finish(&mut self) -> Result<Option<Vec<u8>>>;
}

impl Framing for WatchFrames {
    const PROTOBUF: bool = true;
    fn push(&mut self, data: &[u8]) {
        WatchFrames::push(self, data);
    }
    fn next_event(&mut self) -> Result<Option<Vec<u8>>> {
        self.next_frame()
    }
    fn finish(&mut self) -> Result<Option<Vec<u8>>> {
        WatchFrames::finish(self).map(|()| None)
    }
}

impl Framing for WatchLines {
    const PROTOBUF: bool = false;
    fn push(&mut self, data: &[u8]) {
        WatchLines::push(self, data);
    }
    fn next_event(&mut self) -> Result<Option<Vec<u8>>> {
        self.next_line()
    }
    fn finish(&mut self) -> Result<Option<Vec<u8>>> {
        WatchLines::finish(self)
    }
}

/// `upstream`, a watch, made `v1` event by event as it streams: each event is sent on as
/// soon as its last byte arrived.
fn streamed<F: Framing>(upstream: Incoming, framing: F, counters: Arc<Counters>) -> Body {
    let stream = futures_util::stream::unfold(Some((upstream, framing)), move |state| {
        let counters = counters.clone();
        async move {
            let (mut upstream, mut framing) = state?;
            loop {
                match framing.next_event() {
                    Ok(Some(event)) => {
                        let events = match F::PROTOBUF {
                            true => &counters.protobuf_events,
                            false => &counters.json_events,
                        };
                        events.fetch_add(1, Ordering::Relaxed);
                        let frame = Ok(Frame::data(Bytes::from(event)));
                        return Some((frame, Some((upstream, framing))));
                    }
                    Ok(None) => {}
                    Err(error) => return Some((Err(error.into()), None)),
                }
                match upstream.frame().await {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            framing.push(&data);
                        }
                    }
                    Some(Err(error)) => return Some((Err(error.into()), None)),
                    None => {
                        return match framing.finish() {
                            Ok(Some(last)) => Some((Ok(Frame::data(Bytes::from(last))), None)),
                            Ok(None) => None,
                            Err(error) => Some((Err(error.into()), None)),
                        };
                    }
                }
            }
        }
    });
    StreamBody::new(stream).boxed_unsync()
}
