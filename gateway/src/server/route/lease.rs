//! First: kubelet's renewals of this node's lease, which the gateway answers itself, online
//! and offline, since its heartbeat is the node's lease in the cloud.

use http::Request;
use hyper::body::Incoming;

use super::door::{Answer, Door, Turn};
use crate::server::proxy_error::ProxyError;

/// kubelet's node lease: answers its renewals, hands back the rest.
pub(super) async fn answer(
    door: &mut Door<'_>,
    request: Request<Incoming>,
) -> Result<Turn, ProxyError> {
    let context = &door.context;
    let local = &door.state.local;
    if !local.answers_kubelet_lease(&context.info, &context.cache_component) {
        return Ok(Turn::Next(request));
    }
    let answer = local.kubelet_lease(&context.info, request).await?;
    Ok(Turn::Answered(Answer::Done(answer)))
}
