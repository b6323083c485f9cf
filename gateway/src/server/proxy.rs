//! The proxy handler: one request from a node component to an apiserver and back, the
//! response body streamed through as it arrives.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::metered::{InFlight, Metered};
use super::plan::{self, Plan};
use super::status::ProxyError;
use super::{ResponseBody, State, headers, respond, upgrade};
use crate::cache::ListQuery;
use crate::local::Ask;
use crate::metrics::{Metrics, RequestLabels, ResponseLabels};
use crate::request::{RequestInfo, Verb, component_of};
use crate::upstream::{RequestBody, TransportError};

/// Serves one proxied request; errors become `Status` responses here.
pub async fn handle(
    state: Arc<State>,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<ResponseBody> {
    let info = RequestInfo::parse(
        request.method(),
        request.uri().path(),
        request.uri().query(),
    );
    let component = component_of(request.headers());
    let labels = state
        .metrics
        .request_labels(&component, info.verb.as_str(), &info.resource);
    let in_flight = InFlight::enter(&state.metrics, &labels);
    tracing::trace!(%component, verb = %info.verb, resource = %info.resource, path = %request.uri().path(), "request");

    let response = match forward(&state, request, peer, &info, &component).await {
        Ok(response) => response,
        Err(error) => error.into_response(&state.metrics),
    };
    state
        .metrics
        .requests
        .get_or_create(&ResponseLabels {
            component: labels.component.clone(),
            verb: labels.verb.clone(),
            resource: labels.resource.clone(),
            code: response.status().as_str().to_owned(),
        })
        .inc();
    meter(response, &state.metrics, &labels, in_flight)
}

async fn forward(
    state: &Arc<State>,
    mut request: Request<Incoming>,
    peer: SocketAddr,
    info: &RequestInfo,
    component: &str,
) -> Result<Response<ResponseBody>, ProxyError> {
    if request.method() == Method::CONNECT {
        return Err(ProxyError::MethodNotAllowed(Method::CONNECT));
    }
    if !request.uri().path().starts_with('/') {
        return Err(ProxyError::BadRequest("the request target must be a path"));
    }
    let query = request.uri().query().map(str::to_owned);
    let ask = || Ask {
        info,
        component,
        query: ListQuery::parse(query.as_deref()),
    };
    if state.local.answers_kubelet_lease(info, component) {
        return Ok(state.local.kubelet_lease(info, request).await);
    }
    if !state.balancer.any_healthy() {
        return Ok(state.local.serve(ask(), request).await);
    }
    let server = state
        .balancer
        .pick()
        .or_else(|| state.balancer.pick_any())
        .ok_or(ProxyError::NoServer)?;

    let upgrading = headers::is_upgrade(request.headers());
    let client_upgrade = upgrading.then(|| hyper::upgrade::on(&mut request));
    let plan = if upgrading {
        None
    } else {
        Plan::of(state, info, component, query.as_deref(), request.headers())
    };
    if plan.as_ref().is_some_and(Plan::frames) {
        plan::ask_for_json(request.headers_mut());
    }
    headers::strip_hop_by_hop(request.headers_mut(), upgrading);
    headers::add_forwarded_for(request.headers_mut(), peer);
    request.headers_mut().remove(http::header::HOST);
    // Clients may speak HTTP/2 (over TLS, by ALPN); upstream connections are HTTP/1.1.
    *request.version_mut() = http::Version::HTTP_11;
    // Only the path and query travel; the transport puts the server in front.
    if let Some(path_and_query) = request.uri().path_and_query().cloned() {
        *request.uri_mut() = http::Uri::from(path_and_query);
    }
    let request: Request<RequestBody> = request.map(|body| body.map_err(Into::into).boxed_unsync());

    let response = match state.transport.send(&server.url, request).await {
        Ok(response) => response,
        // A read that cannot reach the cloud is answered from the cache.
        Err(TransportError::Connect { server, source })
            if matches!(info.verb, Verb::Get | Verb::List | Verb::Watch) =>
        {
            tracing::debug!(%server, error = %source, "connect failed: answering from the cache");
            return Ok(state.local.read(ask()).await);
        }
        Err(error) => return Err(error.into()),
    };
    if let Some(client_upgrade) = client_upgrade {
        return Ok(upgrade::tunnel(client_upgrade, response));
    }
    Ok(respond::respond(state, info, component, plan, response).await)
}

/// Wraps the response body so its bytes are counted and the request stays in flight until
/// the body ends: a watch counts as long as it streams.
fn meter(
    response: Response<ResponseBody>,
    metrics: &Metrics,
    labels: &RequestLabels,
    in_flight: InFlight,
) -> Response<ResponseBody> {
    response.map(|body| Metered::new(body, metrics, labels, in_flight).boxed_unsync())
}
