//! Fourth: the local cache. While no apiserver is healthy it answers everything (the local
//! proxy: reads from the cache, the node's own writes into its local layer). Online, it
//! answers one request: the writer's watch resumed into a set it wrote in while cut, told
//! to list again (`410 Expired`), as the cloud never saw those writes.

use http::Request;
use hyper::body::Incoming;

use super::door::{Answer, Door, Turn};
use crate::server::proxy_error::ProxyError;

/// The local cache: answers everything while no apiserver is healthy, and online the
/// writer's watch it must send to list again; hands back the rest.
pub(super) async fn answer(
    door: &mut Door<'_>,
    request: Request<Incoming>,
) -> Result<Turn, ProxyError> {
    let state = door.state;
    if !state.balancer.any_healthy() {
        door.may_answer_offline()?;
        let answer = state
            .local
            .serve(&door.context, request, door.is_node_caller())
            .await?;
        return Ok(Turn::Answered(Answer::Done(answer)));
    }
    if door.is_node_caller()
        && let Some(relist) = state.local.relist_after_own_writes(&door.context).await
    {
        return Ok(Turn::Answered(Answer::Done(relist)));
    }
    Ok(Turn::Next(request))
}
