//! Second: the node's lists and watches of pool-scope resources, from the multiplexer's
//! shared state, online and offline alike. Only the node's components are answered here: a
//! caller with its own credentials is authorized by the apiserver, request by request.

use http::Request;
use hyper::body::Incoming;

use super::door::{Answer, Door, Turn};
use crate::node::multiplexer::{self, Refilter};
use crate::server::proxy_error::ProxyError;

/// The multiplexer: answers the node's lists and watches it serves, hands back the rest.
pub(super) async fn answer(
    door: &mut Door<'_>,
    request: Request<Incoming>,
) -> Result<Turn, ProxyError> {
    let state = door.state;
    let Some(multiplexer) = state.multiplexer.as_ref() else {
        return Ok(Turn::Next(request));
    };
    // Only a client that takes what it serves (JSON, not a table).
    let serves = door.plan.as_ref().is_some_and(|plan| plan.serves());
    if !door.is_node_caller() || multiplexer::is_feed(request.headers()) || !serves {
        return Ok(Turn::Next(request));
    }
    let context = &door.context;
    if let Some(ready) = multiplexer.until_ready(context, multiplexer::READY_WITHIN) {
        ready.await;
    }
    let online = state.balancer.any_healthy();
    // A filtered watch follows what its filters look up, and re-filters what that
    // touches.
    let session = door.plan.as_ref().and_then(|plan| plan.session.as_ref());
    let refilter = state
        .informers
        .as_ref()
        .zip(session)
        .map(|(informers, session)| Refilter {
            changes: informers.changes(),
            reads: session.lookup_use(),
            resends: session.resends(),
        });
    let timeout = state.local.min_request_timeout;
    Ok(
        match multiplexer.answer(context, online, timeout, refilter) {
            multiplexer::Answer::Pass => Turn::Next(request),
            multiplexer::Answer::Serve(response) => Turn::Answered(Answer::Shared(response)),
        },
    )
}
