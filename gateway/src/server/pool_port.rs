//! The pool port (`--node-ip`:`--multiplexer-port`, HTTPS): where the pool's followers feed
//! from this gateway when it leads. It answers the lists and watches of the multiplexer's
//! resources from their shared state, unfiltered (each follower filters for its own
//! clients), and `/readyz` for the followers' health checks; nothing else. Only nodes of
//! this node's pool are served: a client certificate of the cluster's CA (the TLS
//! handshake requires one) for `system:node:<name>` in group `system:nodes`, whose node
//! carries this pool's label. Nothing there reaches the cloud on this node's identity.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::caller::PeerCertificate;
use super::plan::Plan;
use super::proxy_error::ProxyError;
use super::respond;
use super::state::State;
use crate::metrics::ResponseLabels;
use crate::node::multiplexer::Answer;
use crate::node::pool::NODEPOOL_LABEL;
use crate::reply::ResponseBody;
use crate::request::RequestContext;

/// The component the pool port's requests are counted as (`edgegate_requests_total`).
const FOLLOWERS: &str = "pool-followers";

/// How long a follower's request waits for the leader's state to hold its first list: a
/// follower turned away goes to the cloud, the traffic the leader is there to save.
const LEADER_READY_WITHIN: Duration = Duration::from_secs(30);

/// Serves one request of a follower.
pub async fn handle(
    state: Arc<State>,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<ResponseBody> {
    let context = RequestContext::parse(request.method(), request.uri(), request.headers());
    let answer = match member(&state, request.extensions().get::<Arc<PeerCertificate>>()) {
        Ok(node) => {
            tracing::trace!(%node, %peer, path = %request.uri().path(), "pool request");
            serve(&state, request, &context).await
        }
        Err(refused) => Err(refused),
    };
    let response = answer.unwrap_or_else(|refused| refused.into_response(&state.metrics));
    let info = &context.info;
    let labels = state
        .metrics
        .request_labels(FOLLOWERS, info.verb.as_str(), &info.resource);
    state
        .metrics
        .requests
        .get_or_create(&ResponseLabels {
            component: labels.component,
            verb: labels.verb,
            resource: labels.resource,
            code: response.status().as_str().to_owned(),
        })
        .inc();
    response
}

/// The node a follower's certificate names, if it is of this node's pool.
fn member(state: &State, certificate: Option<&Arc<PeerCertificate>>) -> Result<String, ProxyError> {
    let node = certificate
        .and_then(|certificate| certificate.node())
        .ok_or(ProxyError::NotOfThePool(None))?;
    let pool = state.pool.name.borrow().clone();
    let theirs = state
        .informers
        .as_ref()
        .and_then(|informers| informers.node_label(&node, NODEPOOL_LABEL));
    match (pool, theirs) {
        (Some(pool), Some(theirs)) if pool == theirs => Ok(node),
        _ => Err(ProxyError::NotOfThePool(Some(node))),
    }
}

async fn serve(
    state: &Arc<State>,
    request: Request<Incoming>,
    context: &RequestContext,
) -> Result<Response<ResponseBody>, ProxyError> {
    if request.method() == Method::GET && request.uri().path() == "/readyz" {
        return Ok(crate::reply::text(StatusCode::OK, "ok".to_owned()));
    }
    // Whatever --pool-scope-resources names, no node reads another's Secrets here.
    if context.info.api_group.is_empty() && context.info.resource == "secrets" {
        return Err(ProxyError::NotPoolScope);
    }
    let multiplexer = state.multiplexer.as_ref().ok_or(ProxyError::NotPoolScope)?;
    // Unfiltered, uncached: the follower filters and caches what it is sent.
    let plan = Plan::for_followers(context, request.headers(), &state.filters)
        .ok_or(ProxyError::NotPoolScope)?;
    if let Some(ready) = multiplexer.until_ready(context, LEADER_READY_WITHIN) {
        ready.await;
    }
    let online = state.balancer.any_healthy();
    match multiplexer.answer(context, online, state.local.min_request_timeout, None) {
        Answer::Pass => Err(ProxyError::NotPoolScope),
        Answer::Serve(response) => respond::respond(state, context, Some(plan), response).await,
    }
}
