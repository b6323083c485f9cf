//! The hub server: the gateway's own endpoints for operators and probes.
//!
//! | path | answer |
//! |---|---|
//! | `GET /v1/healthz` | `200 OK` while the process serves |
//! | `GET /v1/readyz` | `200` while an apiserver is reachable, else `503`, with the reason in the body |
//! | `GET /metrics` | Prometheus text format |
//! | `GET /v1/filters` | the live filter chain as JSON |

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};

use super::{ResponseBody, State};

/// Serves one hub request.
pub async fn handle<B>(state: Arc<State>, request: Request<B>) -> Response<ResponseBody> {
    let method = request.method();
    if method != Method::GET && method != Method::HEAD {
        return crate::reply::status_response(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the hub server only answers GET",
        );
    }
    match request.uri().path() {
        "/v1/healthz" => text(StatusCode::OK, "OK".into()),
        "/v1/readyz" => readyz(&state),
        "/v1/filters" => crate::reply::json(
            StatusCode::OK,
            bytes::Bytes::from(state.filters.describe().to_string()),
        ),
        "/metrics" => {
            let mut response = text(StatusCode::OK, state.metrics.encode());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response
        }
        _ => {
            crate::reply::status_response(StatusCode::NOT_FOUND, "NotFound", "no such hub endpoint")
        }
    }
}

fn readyz(state: &State) -> Response<ResponseBody> {
    let servers = state.balancer.servers();
    let healthy: Vec<&str> = servers
        .iter()
        .filter(|s| s.is_healthy())
        .map(|s| s.name.as_str())
        .collect();
    if healthy.is_empty() {
        let body = format!(
            "degraded: none of {} apiserver(s) is reachable; serving the node's components from the local cache\n",
            servers.len()
        );
        text(StatusCode::SERVICE_UNAVAILABLE, body)
    } else {
        text(
            StatusCode::OK,
            format!("ready: upstream {}\n", healthy.join(", ")),
        )
    }
}

fn text(code: StatusCode, body: String) -> Response<ResponseBody> {
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
