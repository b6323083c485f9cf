//! The proxies' door: one request of a node component (or, on the HTTPS proxy, a pod) is
//! read once — its context, its caller, the plan of its response — limited, counted, and
//! handed to the [route table](super::route); the response body is metered as it streams.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::caller::{Caller, PeerCertificate};
use super::metered::{InFlight, Metered};
use super::plan::Plan;
use super::proxy_error::ProxyError;
use super::route::{self, Door, OWN_COMPONENT};
use super::state::State;
use super::{headers, limit};
use crate::metrics::{Metrics, RequestLabels, ResponseLabels};
use crate::reply::ResponseBody;
use crate::request::RequestContext;

/// Serves one request of the plain proxy (the node's components); errors become `Status`
/// responses here. (Not an `async fn`: a future that only awaits another would hold it
/// whole, and a request's future is moved whole where it is boxed.)
pub fn handle(
    state: Arc<State>,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> impl Future<Output = Response<ResponseBody>> + Send + 'static {
    handle_as(state, request, peer, Ok(Caller::Node))
}

/// Serves one request of the HTTPS proxy, where pods arrive: on the caller's own
/// credentials, or this node's certificate (see [`super::caller`]).
pub fn handle_secure(
    state: Arc<State>,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> impl Future<Output = Response<ResponseBody>> + Send + 'static {
    let certificate = request.extensions().get::<Arc<PeerCertificate>>().cloned();
    let caller = Caller::of_secure(
        request.headers(),
        certificate.as_deref(),
        state.local.node_name.as_deref(),
    );
    handle_as(state, request, peer, caller)
}

async fn handle_as(
    state: Arc<State>,
    request: Request<Incoming>,
    peer: SocketAddr,
    caller: Result<Caller, ProxyError>,
) -> Response<ResponseBody> {
    let context = RequestContext::parse(request.method(), request.uri(), request.headers());
    let (info, component) = (&context.info, &context.component);
    let labels = state
        .metrics
        .request_labels(component, info.verb.as_str(), &info.resource);
    let in_flight = InFlight::enter(&state.metrics, &labels);
    tracing::trace!(%component, verb = %info.verb, resource = %info.resource, path = %request.uri().path(), "request");

    let upgrading = headers::is_upgrade(request.headers());
    // The gateway's own clients (filter lookups, yurt-hub-cfg), on the plain proxy, are not
    // counted, as YurtHub's informers reach the apiserver without passing its limit: a list
    // of theirs the apiserver is slow to answer must not turn the node's components away.
    let enter = |caller: &Caller| {
        if matches!(caller, Caller::Node) && component == OWN_COMPONENT {
            Ok(None)
        } else {
            state.in_flight.enter(info, upgrading)
        }
    };
    let response = match caller.map(|caller| {
        let slot = enter(&caller);
        (caller, slot)
    }) {
        Err(refused) => refused.into_response(&state.metrics),
        Ok((caller, Ok(slot))) => {
            // Filters see the component; the cache, its caller's partition.
            let cache_component = caller.cache_component(&context.component);
            let context = context.cached_for(cache_component);
            let plan = if upgrading {
                None
            } else {
                Plan::of(
                    &context,
                    request.headers(),
                    &state.filters,
                    &state.cache.policy(),
                )
            };
            let door = Door {
                state: &state,
                context,
                caller,
                plan,
                peer,
            };
            // Boxed: the route's future is most of a request's state, and a future is moved
            // whole wherever it is created; boxed, it is written once, and the handler's
            // future, which the connection boxes for each request, stays small.
            let response = match Box::pin(route::route(door, request)).await {
                Ok(response) => response,
                Err(error) => error.into_response(&state.metrics),
            };
            limit::hold(response, slot)
        }
        Ok((_, Err(refused))) => refused.into_response(&state.metrics),
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
