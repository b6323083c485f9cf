//! The proxy handler: one request from a node component to an apiserver and back, the
//! response body streamed through as it arrives.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::metered::{InFlight, Metered};
use super::status::ProxyError;
use super::{ResponseBody, State, headers, upgrade};
use crate::metrics::{Metrics, RequestLabels, ResponseLabels};
use crate::request::{RequestInfo, component_of};
use crate::upstream::RequestBody;

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

    let response = match forward(&state, request, peer).await {
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
    state: &State,
    mut request: Request<Incoming>,
    peer: SocketAddr,
) -> Result<Response<ResponseBody>, ProxyError> {
    if request.method() == Method::CONNECT {
        return Err(ProxyError::MethodNotAllowed(Method::CONNECT));
    }
    if !request.uri().path().starts_with('/') {
        return Err(ProxyError::BadRequest("the request target must be a path"));
    }
    let server = state
        .balancer
        .pick()
        .or_else(|| state.balancer.pick_any())
        .ok_or(ProxyError::NoServer)?;

    let upgrading = headers::is_upgrade(request.headers());
    let client_upgrade = upgrading.then(|| hyper::upgrade::on(&mut request));
    headers::strip_hop_by_hop(request.headers_mut(), upgrading);
    headers::add_forwarded_for(request.headers_mut(), peer);
    request.headers_mut().remove(http::header::HOST);
    // Only the path and query travel; the transport puts the server in front.
    if let Some(path_and_query) = request.uri().path_and_query().cloned() {
        *request.uri_mut() = http::Uri::from(path_and_query);
    }
    let request: Request<RequestBody> = request.map(|body| body.map_err(Into::into).boxed_unsync());

    let mut response = state.transport.send(&server.url, request).await?;
    if let Some(client_upgrade) = client_upgrade {
        return Ok(upgrade::tunnel(client_upgrade, response));
    }
    headers::strip_hop_by_hop(response.headers_mut(), false);
    Ok(response.map(|body| body.map_err(Into::into).boxed_unsync()))
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
