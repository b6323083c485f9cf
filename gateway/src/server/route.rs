//! The route table. A request of the proxies passes one door, where what it is — its
//! context, its caller, the plan of its response — is made once. Then the answerers take
//! it in order, each answering it or handing it to the next, and the winner's answer goes
//! out through the one [`respond`](super::respond::respond):
//!
//! | # | answerer | answers |
//! |---|---|---|
//! | 1 | [`lease`] | kubelet's renewals of this node's lease, online and offline |
//! | 2 | [`shared`] | the node's lists and watches of pool-scope resources, from the multiplexer's shared state |
//! | 3 | [`leader`] | the multiplexer's own feeds on a follower, from a pool leader |
//! | 4 | [`cache`] | while no apiserver is healthy, everything, from the cache; online, the writer's watch of a set it wrote in while cut (`410`) |
//! | 5 | [`cloud`] | the rest, from a healthy apiserver (on a failed connect once more from the next); a read none can answer, from the cache |

mod cache;
mod cloud;
mod door;
mod leader;
mod lease;
mod shared;

use http::{Method, Request, Response};
use hyper::body::Incoming;

use self::door::{Answerer, Turn};
pub(super) use self::door::{Door, OWN_COMPONENT};
use super::proxy_error::ProxyError;
use crate::reply::ResponseBody;

/// The answerers, in the order they are asked.
const ROUTE: [&dyn Answerer; 5] = [
    &lease::KubeletLease,
    &shared::Shared,
    &leader::LeaderFeed,
    &cache::LocalCache,
    &cloud::Cloud,
];

/// Answers `request` through the route table.
pub(super) async fn route(
    mut door: Door<'_>,
    mut request: Request<Incoming>,
) -> Result<Response<ResponseBody>, ProxyError> {
    if request.method() == Method::CONNECT {
        return Err(ProxyError::MethodNotAllowed(Method::CONNECT));
    }
    if !request.uri().path().starts_with('/') {
        return Err(ProxyError::BadRequest("the request target must be a path"));
    }
    if let Some(until_synced) = door.until_lookups_synced() {
        until_synced.await;
    }
    for answerer in ROUTE {
        match answerer.answer(&mut door, request).await? {
            Turn::Next(back) => request = back,
            Turn::Answered(answer) => return door.respond(answer).await,
        }
    }
    // The cloud answers whatever reaches it.
    Err(ProxyError::NoServer)
}
