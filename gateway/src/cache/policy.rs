//! What is cached: responses to the components in `--cache-agents`, for resource requests
//! that read or write whole objects, as YurtHub decides it.

use std::collections::BTreeSet;

use super::key::{ResourceKey, SetKey};
use crate::request::{RequestContext, Verb};

/// Resources never cached: reviews and requests whose answers are decisions, not state.
const NEVER_CACHED: &[&str] = &[
    "subjectaccessreviews",
    "selfsubjectaccessreviews",
    "selfsubjectrulesreviews",
    "localsubjectaccessreviews",
    "tokenreviews",
    "certificatesigningrequests",
    "events",
];

/// Separates a component from the identity its partition belongs to
/// ([`CachePolicy::partition`]).
const PARTITION_SEPARATOR: char = '@';
/// Hex digits of a partition's identity digest.
const PARTITION_DIGEST_LEN: usize = 16;

/// Where a response goes in the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheTarget {
    /// A list (page): replaces its set when complete. `continue_from` is the request's
    /// `continue` token for the pages after the first.
    List {
        /// The set the list replaces.
        set: SetKey,
        /// The `continue` token of the request, if it asks for a later page.
        continue_from: Option<String>,
    },
    /// A watch: its events update the set.
    Watch(SetKey),
    /// One object (get, create, update, patch, or their `status`).
    Object(ResourceKey),
}

/// The components whose responses are cached.
#[derive(Clone, Debug)]
pub struct CachePolicy {
    all: bool,
    agents: BTreeSet<String>,
}

impl CachePolicy {
    /// A policy for `agents` (`*` caches every component).
    pub fn new<S: AsRef<str>>(agents: &[S]) -> CachePolicy {
        let agents: BTreeSet<String> = agents
            .iter()
            .map(|a| a.as_ref().trim().to_ascii_lowercase())
            .filter(|a| !a.is_empty())
            .collect();
        CachePolicy {
            all: agents.contains("*"),
            agents,
        }
    }

    /// The agents named (`*` among them when every component is cached).
    pub fn agents(&self) -> Vec<String> {
        self.agents.iter().cloned().collect()
    }

    /// Whether responses to `component` are cached (a partition's, when its component's are).
    pub fn caches_component(&self, component: &str) -> bool {
        let agent = agent_of(component);
        !agent.is_empty() && (self.all || self.agents.contains(agent))
    }

    /// The cache component of `component`'s requests made on the identity whose digest is
    /// `identity` (the HTTPS proxy's callers with their own tokens): `<component>@<16 hex
    /// digits of the digest>`, cached when `component` is, and apart from what anyone else
    /// was served. The digest's fixed length at the end keeps two partitions apart whatever
    /// a client puts in its `User-Agent`.
    pub fn partition(component: &str, identity: &[u8; 32]) -> String {
        let mut name = String::with_capacity(component.len() + 1 + PARTITION_DIGEST_LEN);
        name.push_str(component);
        name.push(PARTITION_SEPARATOR);
        for byte in &identity[..PARTITION_DIGEST_LEN / 2] {
            name.push_str(&format!("{byte:02x}"));
        }
        name
    }

    /// Where the response to `request` goes in the cache (for its cache component), if
    /// anywhere.
    pub fn target(&self, request: &RequestContext) -> Option<CacheTarget> {
        let (component, info, query) = (&request.cache_component, &request.info, &request.query);
        if !self.caches_component(component)
            || !info.is_resource_request
            || !(info.subresource.is_empty() || info.subresource == "status")
            || NEVER_CACHED.contains(&info.resource.as_str())
        {
            return None;
        }
        let resource = ResourceKey {
            component: component.to_owned(),
            resource: info.resource.clone(),
            version: info.api_version.clone(),
            group: info.api_group.clone(),
        };
        match info.verb.api()? {
            Verb::Get | Verb::Create | Verb::Update | Verb::Patch => {
                Some(CacheTarget::Object(resource))
            }
            Verb::List | Verb::Watch => {
                let set = SetKey::new(resource, &info.namespace, &query.labels, &query.fields);
                Some(if info.verb == Verb::Watch {
                    CacheTarget::Watch(set)
                } else {
                    CacheTarget::List {
                        set,
                        continue_from: query.continue_token.clone(),
                    }
                })
            }
            Verb::Delete | Verb::DeleteCollection => None,
        }
    }
}

/// The component a cache component stands for: a partition's own, or itself.
fn agent_of(component: &str) -> &str {
    match component.rsplit_once(PARTITION_SEPARATOR) {
        Some((agent, digest))
            if digest.len() == PARTITION_DIGEST_LEN
                && digest.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            agent
        }
        _ => component,
    }
}

impl CacheTarget {
    /// The component it is cached for.
    pub fn component(&self) -> &str {
        match self {
            CacheTarget::List { set, .. } | CacheTarget::Watch(set) => &set.resource.component,
            CacheTarget::Object(resource) => &resource.component,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn target(
        component: &str,
        method: Method,
        path: &str,
        query: Option<&str>,
    ) -> Option<CacheTarget> {
        let policy = CachePolicy::new(crate::cli::DEFAULT_CACHE_AGENTS);
        let uri: http::Uri = match query {
            Some(query) => format!("{path}?{query}"),
            None => path.to_owned(),
        }
        .parse()
        .unwrap();
        let request = RequestContext::parse(&method, &uri, &http::HeaderMap::new())
            .cached_for(component.to_owned());
        policy.target(&request)
    }

    #[test]
    fn lists_and_watches_of_cache_agents_are_cached_by_set() {
        let Some(CacheTarget::List { set, continue_from }) = target(
            "kube-proxy",
            Method::GET,
            "/api/v1/services",
            Some("labelSelector=%21service.kubernetes.io%2Fheadless&limit=500&continue=abc"),
        ) else {
            panic!("a kube-proxy list is cached");
        };
        assert_eq!(set.resource.to_string(), "kube-proxy/services.v1.core");
        assert_eq!(set.label_selector, "!service.kubernetes.io/headless");
        assert_eq!(continue_from.as_deref(), Some("abc"));
        assert!(matches!(
            target("kubelet", Method::GET, "/api/v1/pods", Some("watch=true&fieldSelector=spec.nodeName%3Dedge")),
            Some(CacheTarget::Watch(set)) if set.field_selector == "spec.nodeName=edge"
        ));
    }

    #[test]
    fn a_partition_is_cached_as_its_component_under_a_name_of_its_own() {
        let partition = CachePolicy::partition("coredns", &[0xab; 32]);
        assert_eq!(partition, "coredns@abababababababab");
        let Some(CacheTarget::List { set, .. }) =
            target(&partition, Method::GET, "/api/v1/services", None)
        else {
            panic!("a coredns partition's list is cached");
        };
        assert_eq!(set.resource.component, partition);
        let policy = CachePolicy::new(crate::cli::DEFAULT_CACHE_AGENTS);
        assert!(!policy.caches_component(&CachePolicy::partition("kubectl", &[1; 32])));
        // A component that merely looks like a partition is not one.
        assert!(!policy.caches_component("coredns@abc"));
        assert!(!policy.caches_component(&CachePolicy::partition("coredns@x", &[1; 32])));
    }

    #[test]
    fn objects_and_their_status_are_cached_by_name() {
        for (method, path) in [
            (
                Method::GET,
                "/api/v1/namespaces/kube-system/configmaps/kube-proxy",
            ),
            (Method::PATCH, "/api/v1/nodes/edge-1/status"),
            (Method::POST, "/api/v1/namespaces/default/pods"),
        ] {
            assert!(
                matches!(
                    target("kubelet", method, path, None),
                    Some(CacheTarget::Object(_))
                ),
                "{path}"
            );
        }
    }

    #[test]
    fn other_components_verbs_and_resources_are_not_cached() {
        assert_eq!(target("kubectl", Method::GET, "/api/v1/pods", None), None);
        assert_eq!(target("", Method::GET, "/api/v1/pods", None), None);
        assert_eq!(
            target(
                "kubelet",
                Method::DELETE,
                "/api/v1/namespaces/d/pods/p",
                None
            ),
            None
        );
        assert_eq!(
            target(
                "kubelet",
                Method::GET,
                "/api/v1/namespaces/d/pods/p/log",
                None
            ),
            None
        );
        assert_eq!(
            target(
                "kubelet",
                Method::POST,
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                None
            ),
            None
        );
        assert_eq!(target("kubelet", Method::GET, "/healthz", None), None);
        assert!(CachePolicy::new(&["*"]).caches_component("anything"));
    }
}
