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

use self::door::Turn;
pub(super) use self::door::{Door, OWN_COMPONENT};
use super::proxy_error::ProxyError;
use crate::reply::ResponseBody;

/// Answers `request` through the route table.
pub(super) async fn route(
    mut door: Door<'_>,
    request: Request<Incoming>,
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
    // Each answerer in turn, in the table's order, awaited in place: a request's turns
    // live in this one future, with no allocation a turn. (The door is lent mutably: its
    // plan's filter session is `Send`, not `Sync`.)
    let answer = 'answered: {
        macro_rules! ask {
            ($answerer:path, $request:expr) => {
                match $answerer(&mut door, $request).await? {
                    Turn::Next(back) => back,
                    Turn::Answered(answer) => break 'answered answer,
                }
            };
        }
        let request = ask!(lease::answer, request);
        let request = ask!(shared::answer, request);
        let request = ask!(leader::answer, request);
        let request = ask!(cache::answer, request);
        cloud::answer(&mut door, request).await?
    };
    door.respond(answer).await
}
