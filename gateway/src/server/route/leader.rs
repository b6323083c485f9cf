//! Third: the multiplexer's feeds on a follower. Their lists and watches go to one of the
//! pool's leaders (its pool port), and are cached as from the cloud — before the cloud's
//! health is asked, since a follower's feeds reach its leaders through a WAN cut. A leader
//! that cannot be reached, is lost in flight or refuses (anything but a 2xx or `410
//! Expired`, which the feed must see to list again) leaves the request to the cloud, at once.

use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;

use super::door::{Answer, Door, Turn};
use crate::node::multiplexer;
use crate::server::proxy_error::ProxyError;
use crate::server::unless_lost::unless_lost;
use crate::server::{headers, plan};
use crate::upstream::RequestBody;

/// The pool's leaders: answer the multiplexer's feeds on a follower; the rest is handed back.
pub(super) async fn answer(
    door: &mut Door<'_>,
    request: Request<Incoming>,
) -> Result<Turn, ProxyError> {
    Ok(match from_leader(door, &request).await {
        Some(answer) => Turn::Answered(answer),
        None => Turn::Next(request),
    })
}

/// A leader's answer to the node's feed `request`, when this node follows leaders and one
/// answers; `None`: the request goes on as any other.
async fn from_leader(door: &mut Door<'_>, request: &Request<Incoming>) -> Option<Answer> {
    let state = door.state;
    // Only the node's own feed: the HTTPS proxy's callers never travel on its identity.
    if !door.is_node_caller() || request.method() != Method::GET {
        return None;
    }
    let leaders = state.pool.leaders.current()?;
    if !multiplexer::is_feed(request.headers()) {
        return None;
    }
    let leader = leaders.pick()?;
    let mut sent: Request<RequestBody> =
        Request::get(Uri::from(request.uri().path_and_query()?.clone()))
            .body(
                Empty::<Bytes>::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .ok()?;
    *sent.headers_mut() = request.headers().clone();
    if door.plan.as_ref().is_some_and(plan::Plan::frames) {
        plan::ask_upstream(sent.headers_mut(), &door.context.info);
    }
    headers::strip_hop_by_hop(sent.headers_mut(), false);
    sent.headers_mut().remove(http::header::HOST);
    let answer = unless_lost(
        leader,
        state.late_answer,
        state.transport.send(&leader.url, sent),
    )
    .await;
    match answer {
        Some(Ok(response))
            if response.status().is_success() || response.status() == StatusCode::GONE =>
        {
            Some(Answer::Forwarded(response))
        }
        Some(Ok(response)) => {
            tracing::warn!(leader = %leader.name, status = %response.status(), "a pool leader refused the multiplexer's feed: the cloud answers it");
            None
        }
        Some(Err(error)) => {
            tracing::info!(leader = %leader.name, %error, "a pool leader cannot be reached: the cloud answers the multiplexer's feed");
            leader.suspect();
            None
        }
        None => {
            tracing::info!(leader = %leader.name, "a pool leader was lost: the cloud answers the multiplexer's feed");
            None
        }
    }
}
