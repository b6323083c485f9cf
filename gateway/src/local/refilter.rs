//! The filters a cached copy passes again when the node's own write changes it: the chain
//! its component's watch of the resource passes, so servicetopology and the rest decide
//! about a locally followed endpoint as they decide about a cloud event.

use bytes::Bytes;

use super::Local;
use crate::cache::ResourceKey;
use crate::request::{RequestInfo, RequestVerb, Verb};
use crate::stream::Verdict;

/// What a changed copy becomes for its component.
#[derive(Debug, PartialEq)]
pub(super) enum Filtered {
    /// Stored and sent as these bytes.
    Shown(Bytes),
    /// A filter left it out: it leaves the component's sets, and its watches are told so.
    Dropped,
    /// A fail-closed filter failed on it: the copy stays as it was (as a cloud event it
    /// would have failed the component's watch, which then lists the cache's copy again).
    Failed,
}

impl Local {
    /// What `object`, a changed copy of `resource` in `namespace`, becomes after the filters
    /// its component's watch passes.
    pub(super) fn refiltered(&self, resource: &ResourceKey, object: Bytes) -> Filtered {
        let Some(filters) = &self.filters else {
            return Filtered::Shown(object);
        };
        // A caller's partition (`coredns@…`) is filtered as its component.
        let component = resource
            .component
            .split_once('@')
            .map_or(resource.component.as_str(), |(component, _)| component);
        let Some(mut session) = filters.session(&watch_of(resource), component) else {
            return Filtered::Shown(object);
        };
        match session.apply(&object) {
            Ok(Verdict::Keep) => Filtered::Shown(object),
            Ok(Verdict::Replace(replaced)) => Filtered::Shown(replaced),
            Ok(Verdict::Drop) => Filtered::Dropped,
            Err(error) => {
                tracing::warn!(component = %resource.component, resource = %resource.resource, %error, "a filter failed on a copy the node's own write changed; the copy stays as it was");
                Filtered::Failed
            }
        }
    }
}

/// An all-namespace watch of `resource`, as a component's reflector makes it.
fn watch_of(resource: &ResourceKey) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: RequestVerb::Api(Verb::Watch),
        api_prefix: if resource.group.is_empty() {
            "api"
        } else {
            "apis"
        },
        api_group: resource.group.clone(),
        api_version: resource.version.clone(),
        namespace: String::new(),
        resource: resource.resource.clone(),
        subresource: String::new(),
        name: String::new(),
    }
}
