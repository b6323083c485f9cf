//! The multiplexer's feeds on a follower: their lists and watches go to one of the pool's
//! leaders (its pool port), and are cached as from the cloud. A leader that cannot be
//! reached, is lost in flight or refuses (anything but a 2xx or `410 Expired`, which the
//! feed must see to list again) leaves the request to the cloud, at once.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};

use super::caller::Caller;
use super::lost::unless_lost;
use super::plan::{self, Plan};
use super::state::State;
use super::status::ProxyError;
use super::{headers, respond};
use crate::multiplexer;
use crate::reply::ResponseBody;
use crate::request::RequestContext;
use crate::upstream::RequestBody;

/// The answer of a leader to a feed's request, when this node follows leaders and one
/// answers; `None`: the request goes on as any other.
pub async fn from_leader<B>(
    state: &Arc<State>,
    request: &Request<B>,
    context: &RequestContext,
    caller: &Caller,
) -> Option<Result<Response<ResponseBody>, ProxyError>> {
    // Only the node's own feed: the HTTPS proxy's callers never travel on its identity.
    if !matches!(caller, Caller::Node) || request.method() != Method::GET {
        return None;
    }
    let leaders = state.pool.leaders.current()?;
    if !multiplexer::is_feed(request.headers()) {
        return None;
    }
    let leader = leaders.pick()?;
    let plan = Plan::of(
        context,
        request.headers(),
        &state.filters,
        &state.cache.policy(),
    );
    let mut sent: Request<RequestBody> =
        Request::get(Uri::from(request.uri().path_and_query()?.clone()))
            .body(
                Empty::<Bytes>::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .ok()?;
    *sent.headers_mut() = request.headers().clone();
    if plan.as_ref().is_some_and(Plan::frames) {
        plan::ask_upstream(sent.headers_mut(), &context.info);
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
            Some(respond::respond(&state.cache, &state.watch_ends, context, plan, response).await)
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
