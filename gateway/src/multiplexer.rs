//! The node-level multiplexer: one upstream list and watch per pool-scope resource
//! (`--pool-scope-resources`: Services and EndpointSlices by default, as YurtHub) for the
//! whole node, and every local client's list and watch of it answered from that shared
//! state — with its own selectors, resourceVersion semantics, bookmarks and filters, online
//! and offline alike.
//!
//! Kept once: the state in memory ([`state`]), fed by the one upstream watch ([`feed`]),
//! whose list and watch the gateway's cache persists (so a restart starts from them, and
//! offline answers read them). After a re-list, open watches get the differences as
//! events: nothing stale survives an offline reboot (YurtHub #2809), and no client has to
//! re-list. Each client's filters work on their own copy of each object (YurtHub #2481).

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use http::HeaderMap;

use crate::cache::Store;

mod answer;
mod feed;
mod list;
mod state;
mod watch;

pub use answer::Answer;
pub use state::{Change, Object, Shared};

/// The body of the multiplexer's answers (they cannot fail: their bytes are in memory).
pub type SharedBody =
    http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, std::convert::Infallible>;

/// The `User-Agent` purpose of the feed's requests: they go upstream, never to the
/// multiplexer itself.
const FEED_PURPOSE: &str = "multiplexer";

/// One pool-scope resource: `group/version/resource` (`version/resource` for the core group).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Resource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource, plural and lowercase.
    pub plural: String,
}

/// A `--pool-scope-resources` entry that is not `[group/]version/resource`.
#[derive(Debug, thiserror::Error)]
#[error("pool-scope resource {0:?} is not [group/]version/resource")]
pub struct ResourceError(String);

impl Resource {
    /// Reads `group/version/resource`, `version/resource` or `/version/resource` (core).
    pub fn parse(text: &str) -> Result<Resource, ResourceError> {
        let parts: Vec<&str> = text.trim().split('/').collect();
        let (group, version, plural) = match parts[..] {
            [version, plural] => ("", version, plural),
            [group, version, plural] => (group, version, plural),
            _ => return Err(ResourceError(text.to_owned())),
        };
        let valid = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        };
        if !(valid(version) && valid(plural) && (group.is_empty() || valid(group))) {
            return Err(ResourceError(text.to_owned()));
        }
        Ok(Resource {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
        })
    }

    /// The path of its list across all namespaces.
    fn path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}/{}", self.version, self.plural)
        } else {
            format!("/apis/{}/{}/{}", self.group, self.version, self.plural)
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.plural)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.plural)
        }
    }
}

/// The shared states of the pool-scope resources, each fed by its own task.
pub struct Multiplexer {
    shared: HashMap<Resource, Arc<Shared>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Multiplexer {
    /// Starts one feed per resource through the gateway's proxy at `proxy`, each from what
    /// `store` persisted of it.
    pub fn start(
        proxy: SocketAddr,
        store: Option<Arc<dyn Store>>,
        resources: &[Resource],
    ) -> Result<Multiplexer, kube::Error> {
        let mut config = crate::informer::config_through(proxy, FEED_PURPOSE)?;
        // A quiet watch sends nothing for minutes; the proxy on loopback ends it when the
        // cloud goes away.
        config.read_timeout = None;
        let client = kube::Client::try_from(config)?;
        let mut shared = HashMap::new();
        let mut tasks = Vec::new();
        for resource in resources {
            let state = Arc::new(Shared::new());
            let feed = feed::Feed {
                client: client.clone(),
                resource: resource.clone(),
                shared: state.clone(),
            };
            tasks.push(tokio::spawn(feed.run(store.clone())));
            shared.insert(resource.clone(), state);
        }
        Ok(Multiplexer { shared, tasks })
    }

    /// A multiplexer of states fed by hand (tests).
    #[cfg(test)]
    pub(crate) fn of(shared: HashMap<Resource, Arc<Shared>>) -> Multiplexer {
        Multiplexer {
            shared,
            tasks: Vec::new(),
        }
    }

    /// The shared state of `resource`, if it is pool-scope.
    fn shared(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<Shared>> {
        self.shared.get(&Resource {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
        })
    }

    /// Per resource: objects held, their bytes, and changes in the window.
    pub fn sizes(&self) -> Vec<(String, (usize, usize, usize))> {
        self.shared
            .iter()
            .map(|(resource, shared)| (resource.to_string(), shared.size()))
            .collect()
    }
}

impl Drop for Multiplexer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Whether a request is the feed's own (which the multiplexer must not answer).
pub fn is_feed(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::USER_AGENT)
        .and_then(|agent| agent.to_str().ok())
        .is_some_and(|agent| {
            agent.starts_with("edgegate/") && agent.ends_with(&format!(" {FEED_PURPOSE}"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_scope_resources_read_as_yurthub_writes_them() {
        let core = Resource::parse("v1/services").unwrap();
        assert_eq!(
            (core.group.as_str(), core.path()),
            ("", "/api/v1/services".to_owned())
        );
        assert_eq!(Resource::parse("/v1/services").unwrap(), core);
        let slices = Resource::parse("discovery.k8s.io/v1/endpointslices").unwrap();
        assert_eq!(slices.path(), "/apis/discovery.k8s.io/v1/endpointslices");
        assert_eq!(slices.to_string(), "discovery.k8s.io/v1/endpointslices");
        for bad in ["services", "a/b/c/d", "v1/Services", "v1/", "x/v1/svc?x"] {
            assert!(Resource::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_the_feeds_own_requests_are_the_feeds() {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::USER_AGENT,
            "edgegate/0.1.0 multiplexer".parse().unwrap(),
        );
        assert!(is_feed(&headers));
        headers.insert(
            http::header::USER_AGENT,
            "edgegate/0.1.0 informer".parse().unwrap(),
        );
        assert!(!is_feed(&headers));
        headers.insert(
            http::header::USER_AGENT,
            "kube-proxy/v1.20.2 multiplexer".parse().unwrap(),
        );
        assert!(!is_feed(&headers));
    }
}
