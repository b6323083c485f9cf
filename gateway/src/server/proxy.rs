//! The proxy handler: one request from a node component to an apiserver and back, the
//! response body streamed through as it arrives.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::caller::{Caller, PeerCertificate};
use super::metered::{InFlight, Metered};
use super::plan::{self, Plan};
use super::state::State;
use super::status::ProxyError;
use super::{failover, headers, limit, respond, upgrade};
use crate::metrics::{Metrics, RequestLabels, ResponseLabels};
use crate::multiplexer::{self, Answer};
use crate::reply::ResponseBody;
use crate::request::{RequestContext, Verb};
use crate::upstream::{CallerOnly, RequestBody, TransportError};

/// The component the gateway's own clients are (`edgegate/VERSION PURPOSE`).
const OWN_COMPONENT: &str = "edgegate";

/// Serves one request of the plain proxy (the node's components); errors become `Status`
/// responses here.
pub async fn handle(
    state: Arc<State>,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<ResponseBody> {
    handle_as(state, request, peer, Ok(Caller::Node)).await
}

/// Serves one request of the HTTPS proxy, where pods arrive: on the caller's own
/// credentials, or this node's certificate (see [`super::caller`]).
pub async fn handle_secure(
    state: Arc<State>,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<ResponseBody> {
    let certificate = request.extensions().get::<Arc<PeerCertificate>>().cloned();
    let caller = Caller::of_secure(
        request.headers(),
        certificate.as_deref(),
        state.local.node_name.as_deref(),
    );
    handle_as(state, request, peer, caller).await
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
            let forwarded = forward(&state, request, peer, &context, &caller).await;
            let response = match forwarded {
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

async fn forward(
    state: &Arc<State>,
    mut request: Request<Incoming>,
    peer: SocketAddr,
    context: &RequestContext,
    caller: &Caller,
) -> Result<Response<ResponseBody>, ProxyError> {
    let info = &context.info;
    if request.method() == Method::CONNECT {
        return Err(ProxyError::MethodNotAllowed(Method::CONNECT));
    }
    if !request.uri().path().starts_with('/') {
        return Err(ProxyError::BadRequest("the request target must be a path"));
    }
    // Offline, a caller with its own credentials is answered only on a token the apiserver
    // was seen to accept.
    let offline = || match caller {
        Caller::Node => Ok(()),
        Caller::Own(own) => state.known.answers_offline(own),
    };
    if state
        .local
        .answers_kubelet_lease(info, &context.cache_component)
    {
        return Ok(state.local.kubelet_lease(info, request).await?);
    }
    if let Some(until_synced) = until_lookups_synced(state, context, caller) {
        until_synced.await;
    }
    if let Some(answer) = shared(state, request.headers(), context, caller).await {
        return answer;
    }
    // Before the cloud's health: a follower's feeds go to its leaders through a WAN cut.
    if let Some(answer) = super::leader_feed::from_leader(state, &request, context, caller).await {
        return answer;
    }
    if !state.balancer.any_healthy() {
        offline()?;
        let node = matches!(caller, Caller::Node);
        return Ok(state.local.serve(context, request, node).await?);
    }
    // The writer of what the node wrote while cut lists it again from the cloud.
    if matches!(caller, Caller::Node)
        && let Some(relist) = state.local.relist_after_own_writes(context).await
    {
        return Ok(relist);
    }
    if let Some(version) = state.local.cloud_version_for_list(context) {
        list_from(&mut request, version);
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
        Plan::of(
            context,
            request.headers(),
            &state.filters,
            &state.cache.policy(),
        )
    };
    if plan.as_ref().is_some_and(Plan::frames) {
        plan::ask_upstream(request.headers_mut(), info);
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
    if let Caller::Own(_) = caller {
        // Whatever happened to its headers on the way, never the gateway's identity.
        request.extensions_mut().insert(CallerOnly);
    }
    let request: Request<RequestBody> = request.map(|body| body.map_err(Into::into).boxed_unsync());

    let reads = matches!(info.verb.api(), Some(Verb::Get | Verb::List | Verb::Watch));
    let upstreams = failover::Upstreams {
        balancer: &state.balancer,
        transport: &state.transport,
        metrics: &state.metrics,
        late_answer: state.late_answer,
    };
    let failover::Sent { server, answer } =
        failover::send(&upstreams, server, request, reads).await;
    let response = match answer {
        Some(Ok(response)) => {
            if let Caller::Own(own) = caller
                && response.status() != http::StatusCode::UNAUTHORIZED
            {
                state.known.accepted(own);
            }
            response
        }
        // A read that cannot reach the cloud is answered from the cache.
        Some(Err(TransportError::Connect {
            server: name,
            source,
        })) if reads => {
            tracing::debug!(server = %name, error = %source, "connect failed: answering from the cache");
            offline()?;
            return Ok(state.local.read(context).await?);
        }
        Some(Err(error)) => {
            server.suspect();
            return Err(error.into());
        }
        // So is one whose server was found unreachable while it waited: a connection the cut
        // link left open would otherwise hold it until the client gives up.
        None if reads => {
            tracing::debug!(server = %server.name, "server lost in flight: answering from the cache");
            offline()?;
            return Ok(state.local.read(context).await?);
        }
        None => return Err(ProxyError::Lost(server.name.clone())),
    };
    if let Some(client_upgrade) = client_upgrade {
        return Ok(upgrade::tunnel(client_upgrade, response));
    }
    respond::respond(&state.cache, &state.watch_ends, context, plan, response).await
}

/// Has `request` (a list) ask for resourceVersion `version`.
fn list_from<B>(request: &mut Request<B>, version: u64) {
    let uri = request.uri();
    let query = crate::request::with_resource_version(uri.query().unwrap_or_default(), version);
    let target = format!("{}?{query}", uri.path());
    match target.parse() {
        Ok(uri) => {
            tracing::debug!(%target, "a list from a local resourceVersion asks the cloud from its own");
            *request.uri_mut() = uri;
        }
        Err(error) => tracing::warn!(%error, "a list's resourceVersion could not be replaced"),
    }
}

/// For a response filters will judge, a wait until the informers behind their lookups have
/// synced or start-up is over ([`crate::informer::Informers::until_synced`]); `None` for
/// any other, and for the gateway's own clients, which the informers are.
fn until_lookups_synced(
    state: &State,
    context: &RequestContext,
    caller: &Caller,
) -> Option<impl Future<Output = ()> + Send + 'static> {
    let until_synced = state.informers.as_ref()?.until_synced()?;
    let own = matches!(caller, Caller::Node) && context.component == OWN_COMPONENT;
    let filtered = || {
        let generation = state.filters.current();
        generation.applies(&context.info, &context.component)
    };
    (!own && filtered()).then_some(until_synced)
}

/// The answer of the multiplexer's shared state to a list or watch of a pool-scope
/// resource, online and offline alike; `None` for a request it does not answer. Only the
/// node's components are answered there: a caller with its own credentials is authorized by
/// the apiserver, request by request.
async fn shared(
    state: &Arc<State>,
    headers: &http::HeaderMap,
    context: &RequestContext,
    caller: &Caller,
) -> Option<Result<Response<ResponseBody>, ProxyError>> {
    let multiplexer = state.multiplexer.as_ref()?;
    if !matches!(caller, Caller::Node) || multiplexer::is_feed(headers) {
        return None;
    }
    let plan = Plan::of(context, headers, &state.filters, &state.cache.policy())?.served()?;
    if let Some(ready) = multiplexer.until_ready(context, multiplexer::READY_WITHIN) {
        ready.await;
    }
    let online = state.balancer.any_healthy();
    // A filtered watch follows what its filters look up, and re-filters what that touches.
    let refilter =
        state
            .informers
            .as_ref()
            .zip(plan.session.as_ref())
            .map(|(informers, session)| multiplexer::Refilter {
                changes: informers.changes(),
                reads: session.lookup_use(),
                resends: session.resends(),
            });
    let timeout = state.local.min_request_timeout;
    match multiplexer.answer(context, online, timeout, refilter) {
        Answer::Pass => None,
        Answer::Serve(response) => Some(
            respond::respond(
                &state.cache,
                &state.watch_ends,
                context,
                Some(plan),
                response,
            )
            .await,
        ),
    }
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
