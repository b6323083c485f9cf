//! First: kubelet's renewals of this node's lease, which the gateway answers itself, online
//! and offline, since its heartbeat is the node's lease in the cloud.

use http::Request;
use hyper::body::Incoming;

use super::door::{Answer, Answerer, Door, Turn, Turned};

/// kubelet's node lease.
pub(super) struct KubeletLease;

impl Answerer for KubeletLease {
    fn answer<'a>(&'a self, door: &'a mut Door<'_>, request: Request<Incoming>) -> Turned<'a> {
        Box::pin(async move {
            let context = &door.context;
            let local = &door.state.local;
            if !local.answers_kubelet_lease(&context.info, &context.cache_component) {
                return Ok(Turn::Next(request));
            }
            let answer = local.kubelet_lease(&context.info, request).await?;
            Ok(Turn::Answered(Answer::Done(answer)))
        })
    }
}
