//! The shared states of the pool-scope resources, each fed by its own task, and which
//! requests are the feeds' own.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use http::HeaderMap;
use tokio::sync::{broadcast, watch};

use super::feed;
use super::metrics::MultiplexerMetrics;
use super::resource::Resource;
use super::state::Shared;
use crate::cache::Store;
use crate::filter::LookupChange;

/// The `User-Agent` purpose of the feed's requests: they go upstream, never to the
/// multiplexer itself.
const FEED_PURPOSE: &str = "multiplexer";

/// The shared states of the pool-scope resources, each fed by its own task.
pub struct Multiplexer {
    shared: HashMap<Resource, Arc<Shared>>,
    pub(super) metrics: MultiplexerMetrics,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Multiplexer {
    /// Starts one feed per resource through the gateway's proxy at `proxy`, each from what
    /// `store` persisted of it, and notes in each state the changes to what filters look up
    /// (`lookups`, when filters are configured).
    pub fn start(
        proxy: SocketAddr,
        store: Option<Arc<dyn Store>>,
        resources: &[Resource],
        lookups: Option<broadcast::Receiver<LookupChange>>,
        sources: watch::Receiver<u64>,
        registry: &mut prometheus_client::registry::Registry,
    ) -> Result<Multiplexer, kube::Error> {
        let metrics = MultiplexerMetrics::default();
        metrics.register(registry);
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
                metrics: metrics.clone(),
                sources: sources.clone(),
            };
            tasks.push(tokio::spawn(feed.run(store.clone())));
            shared.insert(resource.clone(), state);
        }
        if let Some(lookups) = lookups {
            let states = shared.values().cloned().collect();
            tasks.push(tokio::spawn(note_lookups(lookups, states)));
        }
        Ok(Multiplexer {
            shared,
            metrics,
            tasks,
        })
    }

    /// A multiplexer of states fed by hand (tests).
    #[cfg(test)]
    pub(crate) fn of(shared: HashMap<Resource, Arc<Shared>>) -> Multiplexer {
        Multiplexer {
            shared,
            metrics: MultiplexerMetrics::default(),
            tasks: Vec::new(),
        }
    }

    /// The shared state of `resource`, if it is pool-scope.
    pub(super) fn shared(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<Shared>> {
        self.shared.get(&Resource {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
        })
    }
}

impl Drop for Multiplexer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Notes each change to what filters look up in every state, for the watches resumed later.
async fn note_lookups(mut changes: broadcast::Receiver<LookupChange>, states: Vec<Arc<Shared>>) {
    loop {
        let change = match changes.recv().await {
            Ok(change) => Some(change),
            Err(broadcast::error::RecvError::Lagged(_)) => None,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        for state in &states {
            state.note_lookup(change.clone());
        }
    }
}

/// Whether a request is the feed's own (which the multiplexer must not answer).
pub fn is_feed(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::USER_AGENT)
        .and_then(|agent| agent.to_str().ok())
        .is_some_and(|agent| {
            agent.starts_with("edgegate/")
                && agent
                    .strip_suffix(FEED_PURPOSE)
                    .is_some_and(|rest| rest.ends_with(' '))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

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
