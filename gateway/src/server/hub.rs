//! The hub server: the gateway's own endpoints for operators and probes.
//!
//! | path | answer |
//! |---|---|
//! | `GET /v1/healthz` | `200 OK` while the process serves |
//! | `GET /v1/readyz` | `200` while an apiserver is reachable, else `503`, with the reason in the body (and a damaged cache replaced or a failing cache disk, which leave it `200`) |
//! | `GET /metrics` | Prometheus text format |
//! | `GET /v1/filters` | the live filter chain as JSON |
//! | `GET /v1/cache` | the cached sets as JSON (`edgegate cache ls`) |
//! | `GET /v1/cache/object?component=&resource=&name=` | one cached object (`edgegate cache get`); a Secret's values redacted |
//! | `POST`/`PUT /v1/token` `{"jointoken": "<id>.<secret>"}` | the certificate manager's bootstrap token replaced (YurtHub's) |
//!
//! Only the probes' endpoints (`/v1/healthz`, `/v1/readyz`, `/metrics`) answer callers off
//! loopback ([`access`]).

mod access;
mod error;
mod redact;
mod token;

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode, header};

use self::error::HubError;
use super::state::State;
use crate::cache::{Damage, Fault};
use crate::refusal::refuse;
use crate::reply::{ResponseBody, text};

/// Serves one hub request from `peer`.
pub async fn handle<B>(
    state: Arc<State>,
    request: Request<B>,
    peer: SocketAddr,
) -> Response<ResponseBody>
where
    B: hyper::body::Body,
    B::Error: Into<crate::error::BoxError>,
{
    if let Some(refusal) = access::refused(peer, request.uri().path()) {
        return refuse(&refusal, &state.metrics);
    }
    let method = request.method();
    if request.uri().path() == "/v1/token" {
        return token::update(&state, request).await;
    }
    if method != Method::GET && method != Method::HEAD {
        return refuse(
            &HubError::MethodNotAllowed("the hub server only answers GET"),
            &state.metrics,
        );
    }
    match request.uri().path() {
        "/v1/healthz" => text(StatusCode::OK, "OK".into()),
        "/v1/readyz" => readyz(&state),
        "/v1/cache" => cache_summary(&state).await,
        "/v1/cache/object" => cache_object(&state, request.uri().query()).await,
        "/v1/filters" => crate::reply::json(
            StatusCode::OK,
            bytes::Bytes::from(state.filters.describe().to_string()),
        ),
        "/metrics" => {
            // The local layer's gauges, read again: the cloud replaces the node's objects
            // without the layer taking part. Only a layer that holds something can shrink,
            // and its marks are few (one per copy of the node's own objects): a short read,
            // done here rather than on a blocking thread kept alive for it.
            state.cache.refresh_local_layer();
            let mut response = text(StatusCode::OK, state.metrics.encode());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response
        }
        _ => refuse(&HubError::NoSuchEndpoint, &state.metrics),
    }
}

fn readyz(state: &State) -> Response<ResponseBody> {
    let servers = state.balancer.servers();
    let healthy: Vec<&str> = servers
        .iter()
        .filter(|s| s.is_healthy())
        .map(|s| s.name.as_str())
        .collect();
    if let Some(informers) = &state.informers
        && !informers.is_synced()
    {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the objects filters look up (services, nodes, nodepools) are not synced yet\n".into(),
        );
    }
    // A damaged cache does not make the gateway unready: it forwards as before, and only
    // offline answers lack what the damaged store held. The body says so until exit.
    let damage = state.cache.store().damage().map(|d| damage_line(&d));
    let mut damage = damage.unwrap_or_default();
    // Nor does a failing disk: the node's components are served from the cloud meanwhile.
    if let Some(fault) = state.cache.store().fault() {
        damage.push_str(&fault_line(&fault));
    }
    if healthy.is_empty() {
        let body = format!(
            "degraded: none of {} apiserver(s) is reachable; serving the node's components from the local cache\n{damage}",
            servers.len()
        );
        text(StatusCode::SERVICE_UNAVAILABLE, body)
    } else {
        text(
            StatusCode::OK,
            format!("ready: upstream {}\n{damage}", healthy.join(", ")),
        )
    }
}

/// The line `/v1/readyz` adds once a damaged cache was replaced.
fn damage_line(damage: &Damage) -> String {
    let aside = damage.aside.as_ref().map_or_else(
        || "could not be moved aside".to_owned(),
        |aside| format!("moved aside to {}", aside.display()),
    );
    let fresh = if damage.in_memory {
        "the cache lives in memory until exit (no fresh file could be created)"
    } else {
        "a fresh cache was started"
    };
    format!(
        "cache damaged ({} time(s), last at {} unix time: {}); the damaged store {aside}; {fresh}\n",
        damage.resets, damage.at, damage.reason
    )
}

/// The line `/v1/readyz` adds while the cache's disk fails.
fn fault_line(fault: &Fault) -> String {
    format!(
        "cache disk failing ({}) since {} unix time: {}; nothing is cached or served from the cache until it works again (tried every second)\n",
        fault.kind, fault.since, fault.reason
    )
}

/// The cached sets, as `edgegate cache ls` shows them.
async fn cache_summary(state: &State) -> Response<ResponseBody> {
    let store = state.cache.store().clone();
    match tokio::task::spawn_blocking(move || crate::cache::summary(store.as_ref())).await {
        Ok(Ok(sets)) => crate::reply::json(
            StatusCode::OK,
            bytes::Bytes::from(serde_json::to_vec(&sets).unwrap_or_default()),
        ),
        Ok(Err(error)) => refuse(
            &HubError::Internal(crate::error::error_chain(&error)),
            &state.metrics,
        ),
        Err(error) => refuse(&HubError::Internal(error.to_string()), &state.metrics),
    }
}

/// One cached object: `?component=&resource=&name=`, as `edgegate cache get` asks.
async fn cache_object(state: &State, query: Option<&str>) -> Response<ResponseBody> {
    let mut ask = std::collections::HashMap::new();
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        ask.insert(key.into_owned(), value.into_owned());
    }
    let (Some(component), Some(resource), Some(name)) = (
        ask.remove("component"),
        ask.remove("resource"),
        ask.remove("name"),
    ) else {
        return refuse(
            &HubError::BadRequest("give component, resource and name".to_owned()),
            &state.metrics,
        );
    };
    let store = state.cache.store().clone();
    let found = tokio::task::spawn_blocking(move || {
        crate::cache::object(store.as_ref(), &component, &resource, &name).map(|object| {
            object
                .map(|object| (redact::is_secret(&resource, &object), object))
                .ok_or(format!("{component} has no cached {resource} {name}"))
        })
    })
    .await;
    let refusal = match found {
        Ok(Ok(Ok((false, object)))) => return crate::reply::json(StatusCode::OK, object),
        Ok(Ok(Ok((true, secret)))) => match redact::redact(&secret) {
            Some(redacted) => return crate::reply::json(StatusCode::OK, redacted),
            None => HubError::Internal("the cached Secret is not a JSON object; not shown".into()),
        },
        Ok(Ok(Err(missing))) => HubError::NotCached(missing),
        Ok(Err(error)) => HubError::Internal(crate::error::error_chain(&error)),
        Err(error) => HubError::Internal(error.to_string()),
    };
    refuse(&refusal, &state.metrics)
}
