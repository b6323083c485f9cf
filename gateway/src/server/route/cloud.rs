//! Last: the cloud. The request goes to a healthy apiserver as the client sent it (but for
//! what the plan asks of the response, and the hops' headers), once more to the next
//! healthy one when its server cannot be connected to. A read none can answer is answered
//! from the cache; a write gets the failure.

use http::Request;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::door::{Answer, Door};
use crate::request::Verb;
use crate::server::plan::{self, Plan};
use crate::server::proxy_error::ProxyError;
use crate::server::{failover, headers};
use crate::upstream::{CallerOnly, RequestBody, TransportError};

/// The apiservers, last: the cloud's answer to `request`, or the cache's to a read the
/// cloud cannot answer.
pub(super) async fn answer(
    door: &mut Door<'_>,
    mut request: Request<Incoming>,
) -> Result<Answer, ProxyError> {
    let state = door.state;
    let context = &door.context;
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
    if door.plan.as_ref().is_some_and(Plan::frames) {
        plan::ask_upstream(request.headers_mut(), &context.info);
    }
    headers::strip_hop_by_hop(request.headers_mut(), upgrading);
    headers::add_forwarded_for(request.headers_mut(), door.peer);
    request.headers_mut().remove(http::header::HOST);
    // Clients may speak HTTP/2 (over TLS, by ALPN). Upstream, the transport speaks what the
    // connection negotiated: HTTP/1.1, or HTTP/2 with `--upstream-http2`.
    *request.version_mut() = http::Version::HTTP_11;
    // Only the path and query travel; the transport puts the server in front.
    if let Some(path_and_query) = request.uri().path_and_query().cloned() {
        *request.uri_mut() = http::Uri::from(path_and_query);
    }
    if !door.is_node_caller() {
        // Whatever happened to its headers on the way, never the gateway's identity.
        request.extensions_mut().insert(CallerOnly);
    }
    let request: Request<RequestBody> = request.map(|body| body.map_err(Into::into).boxed_unsync());

    let reads = matches!(
        context.info.verb.api(),
        Some(Verb::Get | Verb::List | Verb::Watch)
    );
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
            if let crate::server::caller::Caller::Own(own) = &door.caller
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
            return from_the_cache(door).await;
        }
        Some(Err(error)) => {
            server.suspect();
            return Err(error.into());
        }
        // So is one whose server was found unreachable while it waited: a connection the cut
        // link left open would otherwise hold it until the client gives up.
        None if reads => {
            tracing::debug!(server = %server.name, "server lost in flight: answering from the cache");
            return from_the_cache(door).await;
        }
        None => return Err(ProxyError::Lost(server.name.clone())),
    };
    Ok(match client_upgrade {
        Some(client) => Answer::Upgraded(response, client),
        None => Answer::Forwarded(response),
    })
}

/// The cache's answer to a read the cloud could not answer.
async fn from_the_cache(door: &mut Door<'_>) -> Result<Answer, ProxyError> {
    door.may_answer_offline()?;
    Ok(Answer::Done(door.state.local.read(&door.context).await?))
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
