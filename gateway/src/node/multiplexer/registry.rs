//! The shared states of the pool-scope resources, each fed by its own task; the set of
//! them, which the pool's `leader-hub-<pool>` ConfigMap may name; and which requests are
//! the feeds' own.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use http::HeaderMap;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use super::feed;
use super::feed::typed;
use super::metrics::MultiplexerMetrics;
use super::object::Object;
use super::resource::Resource;
use super::state::Shared;
use crate::cache::{LocalChange, Store};
use crate::filter::LookupChange;
use crate::upstream::HealthWatch;

/// The `User-Agent` purpose of the feed's requests: they go upstream, never to the
/// multiplexer itself.
const FEED_PURPOSE: &str = "multiplexer";

/// The component the feeds' requests are cached for (their `User-Agent`'s product).
const FEED_COMPONENT: &str = "edgegate";

/// The pool-scope resources' states, by resource: a set that changes while requests read it.
type States = RwLock<HashMap<Resource, Arc<Shared>>>;

/// The shared states of the pool-scope resources, each fed by its own task.
pub struct Multiplexer {
    states: Arc<States>,
    pub(super) metrics: MultiplexerMetrics,
    tasks: Vec<JoinHandle<()>>,
}

/// Where a multiplexer's resources and their feeds come from.
pub struct Sources {
    /// `--pool-scope-resources`: the resources while the pool names none.
    pub configured: Vec<Resource>,
    /// The resources the pool names (`pool-scoped-metadata`), `None` while it names none.
    pub named: watch::Receiver<Option<Vec<Resource>>>,
    /// Changes whenever the feeds should go to their source again (the pool's leaders).
    pub feeds: watch::Receiver<u64>,
    /// The node's own changes while the cloud is away (the local layer's): those of the
    /// feeds' cached copies change the states at once.
    pub local: Option<broadcast::Receiver<Arc<LocalChange>>>,
    /// Whether some apiserver is healthy: a `404` that may be the gateway's own, answered
    /// from a cache with nothing of the resource while the cloud is away, is not taken for
    /// a cluster that does not serve it.
    pub cloud: HealthWatch,
}

impl Multiplexer {
    /// Starts one feed per pool-scope resource through the gateway's proxy at `proxy`, each
    /// from what `store` persisted of it, and starts and stops feeds as the set `sources`
    /// names changes; notes in each state the changes to what filters look up (`lookups`,
    /// when filters are configured).
    pub fn start(
        proxy: SocketAddr,
        store: Option<Arc<dyn Store>>,
        mut sources: Sources,
        lookups: Option<broadcast::Receiver<LookupChange>>,
        registry: &mut prometheus_client::registry::Registry,
    ) -> Result<Multiplexer, kube::Error> {
        let metrics = MultiplexerMetrics::default();
        metrics.register(registry);
        let mut config = crate::node::informer::config_through(proxy, FEED_PURPOSE)?;
        // A quiet watch sends nothing for minutes; the proxy on loopback ends it when the
        // cloud goes away.
        config.read_timeout = None;
        let states = Arc::new(States::default());
        let mut feeds = Feeds {
            client: kube::Client::try_from(config)?,
            store,
            metrics: metrics.clone(),
            sources: sources.feeds,
            cloud: sources.cloud,
            states: states.clone(),
            configured: sources.configured,
            running: HashMap::new(),
        };
        let named = sources.named.borrow_and_update().clone();
        feeds.start_missing(named.as_deref());
        let mut tasks = vec![tokio::spawn(feeds.follow(sources.named))];
        if let Some(lookups) = lookups {
            tasks.push(tokio::spawn(note_lookups(lookups, states.clone())));
        }
        if let Some(local) = sources.local {
            tasks.push(tokio::spawn(apply_local(local, states.clone())));
        }
        Ok(Multiplexer {
            states,
            metrics,
            tasks,
        })
    }

    /// A multiplexer of states fed by hand (tests).
    #[cfg(test)]
    pub(crate) fn of(shared: HashMap<Resource, Arc<Shared>>) -> Multiplexer {
        Multiplexer {
            states: Arc::new(RwLock::new(shared)),
            metrics: MultiplexerMetrics::default(),
            tasks: Vec::new(),
        }
    }

    /// Resolves once each pool-scope resource's state holds its first list, or its wait for
    /// one ended without it ([`Shared::first_list`], in `window`): the end of the gateway's
    /// start-up, for what it does once start-up is over.
    pub fn until_listed(&self, window: Duration) -> impl Future<Output = ()> + Send + use<> {
        let waits: Vec<_> = read(&self.states)
            .values()
            .map(|state| state.first_list(window))
            .collect();
        async move {
            futures_util::future::join_all(waits).await;
        }
    }

    /// The shared state of `resource`, if it is pool-scope.
    pub(super) fn shared(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Shared>> {
        let resource = Resource {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
        };
        read(&self.states).get(&resource).cloned()
    }
}

impl Drop for Multiplexer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn read(states: &States) -> std::sync::RwLockReadGuard<'_, HashMap<Resource, Arc<Shared>>> {
    // The map is whole between calls: a panic cannot leave it half-changed.
    states.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(states: &States) -> std::sync::RwLockWriteGuard<'_, HashMap<Resource, Arc<Shared>>> {
    states.write().unwrap_or_else(PoisonError::into_inner)
}

/// The feeds of the pool-scope resources, started and stopped as the set changes.
struct Feeds {
    client: kube::Client,
    store: Option<Arc<dyn Store>>,
    metrics: MultiplexerMetrics,
    sources: watch::Receiver<u64>,
    cloud: HealthWatch,
    states: Arc<States>,
    configured: Vec<Resource>,
    running: HashMap<Resource, JoinHandle<()>>,
}

impl Feeds {
    /// The pool-scope resources: those the pool names, else the configured ones.
    fn wanted<'a>(&'a self, named: Option<&'a [Resource]>) -> HashSet<&'a Resource> {
        named.unwrap_or(&self.configured).iter().collect()
    }

    /// Starts a feed and a state for each wanted resource that has none.
    fn start_missing(&mut self, named: Option<&[Resource]>) {
        let missing: Vec<Resource> = self
            .wanted(named)
            .into_iter()
            .filter(|resource| !self.running.contains_key(*resource))
            .cloned()
            .collect();
        for resource in missing {
            tracing::info!(%resource, "pool-scope: one upstream list and watch for the node");
            let state = Arc::new(Shared::new());
            let feed = feed::Feed {
                client: self.client.clone(),
                resource: resource.clone(),
                shared: state.clone(),
                metrics: self.metrics.clone(),
                sources: self.sources.clone(),
                cloud: self.cloud.clone(),
            };
            let task = tokio::spawn(feed.run(self.store.clone()));
            write(&self.states).insert(resource.clone(), state);
            self.running.insert(resource, task);
        }
    }

    /// Stops the feed of each resource no longer wanted. Its clients' requests go upstream
    /// from now on; its open watches end (their clients list again, upstream); what its feed
    /// cached stays in the cache.
    async fn stop_unwanted(&mut self, named: Option<&[Resource]>) {
        let wanted = self.wanted(named);
        let unwanted: Vec<Resource> = self
            .running
            .keys()
            .filter(|resource| !wanted.contains(resource))
            .cloned()
            .collect();
        for resource in unwanted {
            tracing::info!(%resource, "no longer pool-scope: its feed stops");
            let Some(task) = self.running.remove(&resource) else {
                continue;
            };
            task.abort();
            // Awaited, so that the feed cannot set its gauges after they are taken out.
            let _ = task.await;
            if let Some(state) = write(&self.states).remove(&resource) {
                state.retire();
            }
            self.metrics.forget(&resource.to_string());
        }
    }

    /// Follows the set the pool names, for as long as the gateway runs.
    async fn follow(mut self, mut named: watch::Receiver<Option<Vec<Resource>>>) {
        while named.changed().await.is_ok() {
            let now = named.borrow_and_update().clone();
            self.stop_unwanted(now.as_deref()).await;
            self.start_missing(now.as_deref());
        }
        // Nothing names the set any more: the feeds run on as they are.
        std::future::pending::<()>().await;
    }
}

impl Drop for Feeds {
    fn drop(&mut self) {
        for task in self.running.values() {
            task.abort();
        }
    }
}

/// Notes each change to what filters look up in every state, for the watches resumed later.
async fn note_lookups(mut changes: broadcast::Receiver<LookupChange>, states: Arc<States>) {
    loop {
        let change = match changes.recv().await {
            Ok(change) => Some(change),
            Err(broadcast::error::RecvError::Lagged(_)) => None,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        for state in read(&states).values() {
            state.note_lookup(change.clone());
        }
    }
}

/// Applies the node's own changes of the feeds' cached copies to their states. One missed
/// (this fell behind) still reaches its state: the feed's offline watch sends what the
/// cache holds after the state's version.
async fn apply_local(mut changes: broadcast::Receiver<Arc<LocalChange>>, states: Arc<States>) {
    loop {
        let change = match changes.recv().await {
            Ok(change) => change,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if change.resource.component != FEED_COMPONENT {
            continue;
        }
        let resource = Resource {
            group: change.resource.group.clone(),
            version: change.resource.version.clone(),
            plural: change.resource.resource.clone(),
        };
        let Some(state) = read(&states).get(&resource).cloned() else {
            continue;
        };
        let bytes = typed(change.event.object.clone(), &state.list_type());
        match Object::parse(bytes) {
            Ok(object) => state.apply_local(change.event.kind, object),
            Err(error) => {
                tracing::debug!(resource = %resource, %error, "a local change the shared state cannot hold");
            }
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
    use edgegate_testkit::process::eventually;

    use super::super::state::ListType;
    use super::*;

    fn held(multiplexer: &Multiplexer) -> Vec<String> {
        let mut held: Vec<String> = read(&multiplexer.states)
            .keys()
            .map(|resource| resource.to_string())
            .collect();
        held.sort();
        held
    }

    #[tokio::test]
    async fn the_pool_scope_resources_follow_what_the_pool_names() {
        let services = Resource::parse("/v1/services").unwrap();
        let slices = Resource::parse("discovery.k8s.io/v1/endpointslices").unwrap();
        let (name, named) = watch::channel(None);
        let sources = Sources {
            configured: vec![services.clone()],
            named,
            feeds: watch::channel(1).1,
            local: None,
            cloud: watch::channel(true).1,
        };
        // A proxy that refuses: the feeds retry in the background, which is not tested here.
        let proxy = "127.0.0.1:1".parse().unwrap();
        let mut registry = prometheus_client::registry::Registry::default();
        let multiplexer = Multiplexer::start(proxy, None, sources, None, &mut registry).unwrap();
        assert_eq!(held(&multiplexer), ["v1/services"]);
        let before = multiplexer.shared("", "v1", "services").unwrap();
        let retired = before.retired();

        name.send_replace(Some(vec![slices.clone()]));
        eventually("the EndpointSlices alone", || {
            held(&multiplexer) == ["discovery.k8s.io/v1/endpointslices"]
        })
        .await;
        assert!(
            *retired.borrow(),
            "the state no longer pool-scope is retired"
        );
        assert!(multiplexer.shared("", "v1", "services").is_none());

        // Named none: none; not named any more: the configured ones, in a new state.
        name.send_replace(Some(vec![]));
        eventually("no states", || held(&multiplexer).is_empty()).await;
        name.send_replace(None);
        eventually("the Services again", || {
            held(&multiplexer) == ["v1/services"]
        })
        .await;
        let after = multiplexer.shared("", "v1", "services").unwrap();
        assert!(!Arc::ptr_eq(&before, &after) && !*after.retired().borrow());
    }

    #[tokio::test(start_paused = true)]
    async fn start_up_ends_when_every_state_holds_its_first_list() {
        let listed = Arc::new(Shared::new());
        listed.replace(list_type(), Vec::new(), 10);
        let listing = Arc::new(Shared::new());
        listing.note_underway(true);
        let multiplexer = Multiplexer::of(HashMap::from([
            (resource("services"), listed),
            (resource("endpoints"), listing.clone()),
        ]));
        let over = tokio::spawn(multiplexer.until_listed(WINDOW));
        // A thin link's first list: data every 2 s for a minute.
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            listing.note_listing();
            assert!(!over.is_finished(), "over while a first list kept coming");
        }
        listing.replace(list_type(), Vec::new(), 12);
        over.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn start_up_ends_when_a_first_list_fails() {
        // No list under way (it failed and waits to try again): one window.
        let multiplexer = Multiplexer::of(HashMap::from([(
            resource("services"),
            Arc::new(Shared::new()),
        )]));
        let started = tokio::time::Instant::now();
        multiplexer.until_listed(WINDOW).await;
        assert_eq!(started.elapsed(), WINDOW);
    }

    const WINDOW: Duration = Duration::from_secs(3);

    fn resource(plural: &str) -> Resource {
        Resource {
            group: String::new(),
            version: "v1".to_owned(),
            plural: plural.to_owned(),
        }
    }

    fn list_type() -> ListType {
        ListType {
            kind: "ServiceList".into(),
            api_version: "v1".into(),
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
