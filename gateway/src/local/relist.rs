//! After a cut, the node's own writes reach the cloud through their writer. kubelet takes a
//! write the local layer answered as made, and its watch resumes from the local versions,
//! so nothing would tell it the cloud never saw the write. A watch that resumes a set the
//! node wrote in while cut is answered `410 Expired`, as kube-apiserver answers a version
//! too old: the writer lists the set from the cloud, finds its writes missing (kubelet
//! compares each pod's status with its own) and makes them again. The list's commit clears
//! the mark; nothing is replayed by the gateway itself.

use http::StatusCode;

use super::{Local, resource_of};
use crate::cache::SetKey;
use crate::reply::{ResponseBody, expired_event, json};
use crate::request::{RequestContext, Verb};

impl Local {
    /// Online, the answer to a watch that resumes a set of its component the node's own
    /// writes changed while cut: one `ERROR` event, `410 Expired`. `None` for any other
    /// request, and for a watch from no version or `0` (it lists as it starts).
    pub async fn relist_after_own_writes(
        &self,
        context: &RequestContext,
    ) -> Option<http::Response<ResponseBody>> {
        if context.info.verb.api() != Some(Verb::Watch) {
            return None;
        }
        let since = context
            .query
            .resource_version
            .as_deref()
            .filter(|since| !since.is_empty() && *since != "0")?;
        if !self
            .cache
            .policy()
            .caches_component(&context.cache_component)
        {
            return None;
        }
        let set = SetKey::new(
            resource_of(context),
            &context.info.namespace,
            &context.query.labels,
            &context.query.fields,
        );
        self.cache.own_writes_from(&set)?;
        // A list that cleared the mark may still be on its way to the store.
        self.cache.caught_up().await;
        let from = self.cache.own_writes_from(&set)?;
        self.cache.metrics().own_write_relists.inc();
        tracing::info!(
            component = %context.cache_component,
            resource = %context.info.resource,
            since,
            own_writes_from = %from,
            "the node wrote in this set while cut: its watch lists again from the cloud"
        );
        let message = format!(
            "too old resource version: {since} ({})",
            self.cache.cloud_version()
        );
        Some(json(StatusCode::OK, expired_event(&message)))
    }
}

impl Local {
    /// Online, the resourceVersion a list is forwarded with in place of its client's, when
    /// the client's is one the local layer gave (past every version the cloud was seen at
    /// for the resource): the highest the cloud was seen at for it. The cloud's watch cache
    /// of the resource may not have reached the local version, and kube-apiserver holds a
    /// list from a version its cache has not reached (1.20: 3 s, then `504` with
    /// `Retry-After`, which client-go retries ten times before it lists from no version, a
    /// long wait for kubelet's list after a reboot while cut; measured: benches/HISTORY.md,
    /// "Measurements behind choices in the code"). `None` for any other request, and for a
    /// list that asks for its version exactly.
    pub fn cloud_version_for_list(&self, context: &RequestContext) -> Option<u64> {
        if context.info.verb.api() != Some(Verb::List)
            || context.query.resource_version_match.as_deref() == Some("Exact")
        {
            return None;
        }
        let asked: u64 = context.query.resource_version.as_deref()?.parse().ok()?;
        let cloud = self
            .cache
            .listed_version(&context.info.api_group, &context.info.resource);
        let local = self.cache.last_local_version();
        (cloud > 0 && asked > cloud && asked <= local).then_some(cloud)
    }
}

#[cfg(test)]
mod tests;
