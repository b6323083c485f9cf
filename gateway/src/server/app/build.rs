//! The app's builders, one per subsystem, in the order each needs the last: the cache, the
//! informers behind filter lookups, the multiplexer, the filters, the pool, the upstreams
//! and their health, and the state every request is served with.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

use super::tasks::Tasks;
use crate::cache::{Cache, CacheMetrics, CachePolicy, GuardedStore, StoreError};
use crate::config::Config;
use crate::filter::{FilterSettings, Filters, Lookup, NoLookup};
use crate::local::{Local, LocalFilters};
use crate::metrics::Metrics;
use crate::node::informer::Informers;
use crate::node::multiplexer::{self, Multiplexer};
use crate::node::pool;
use crate::server::hooks::Hooks;
use crate::server::identity::Identity;
use crate::server::listeners::Listeners;
use crate::server::start_error::ServerError;
use crate::server::state::State;
use crate::server::{caller, limit, upkeep, watch_end};
use crate::upstream::{Balancer, HealthSettings, HealthWatch, Transport, health};

/// What the app is built with besides its configuration.
pub(super) struct Built {
    /// The gateway's identity.
    pub(super) identity: Identity,
    /// The binary's functions.
    pub(super) hooks: Hooks,
    /// Turns true when the gateway begins to stop.
    pub(super) stopping: watch::Receiver<bool>,
}

/// Builds every subsystem of `config` on `listeners`, their tasks in `tasks`: the state
/// requests are served with.
pub(super) async fn state(
    config: &Config,
    built: Built,
    listeners: &Listeners,
    tasks: &Tasks,
) -> Result<Arc<State>, ServerError> {
    let Built {
        identity,
        hooks,
        stopping,
    } = built;
    let proxy = listeners
        .proxy
        .local_addr()
        .map_err(|source| ServerError::Bind {
            addr: config.proxy_addr,
            source,
        })?;
    let mut metrics = Metrics::new();
    let cache = cache(config, &mut metrics).await?;
    let health_settings = health_settings(config, &cache);
    // Informers serve filters' lookups, and the pool port's check of its callers' pool.
    let informers =
        if config.filter_dir.is_some() || config.filter_fleet || config.pool_port.is_some() {
            let informers = Informers::start(proxy, Some(cache.store().clone()));
            Some(Arc::new(informers.map_err(ServerError::Informers)?))
        } else {
            None
        };
    let leaders = Arc::new(pool::Leaders::default());
    // Whether some apiserver is healthy: false until the first probes' verdicts.
    let (any_healthy, health) = watch::channel(false);
    let fed = (&cache, &informers, &leaders, &health);
    let multiplexer = multiplexer(config, proxy, fed, &mut metrics)?;
    let lookup: Arc<dyn Lookup> = match &informers {
        Some(informers) => informers.clone(),
        None => Arc::new(NoLookup),
    };
    let filters = filter_settings(config, hooks, &identity, listeners);
    let filters = Arc::new(Filters::start(filters, lookup, &mut metrics).await?);
    let pool_name = pool_name(config, &informers, &filters, tasks);
    if let Some(hub_interface) = &listeners.hub_interface {
        hub_interface.register(metrics.registry_mut());
    }
    // Cloud mode caches nothing, whatever yurt-hub-cfg adds.
    let hub_config = crate::node::hubcfg::follow(
        proxy,
        (!config.cloud).then(|| cache.clone()),
        filters.clone(),
    );
    tasks.spawn(hub_config.map_err(ServerError::Informers)?);
    let metrics = Arc::new(metrics);
    let transport = upstream_transport(&identity, config);
    let balancer = Arc::new(Balancer::new(identity.servers.clone(), config.lb_mode));
    health_checks(
        config.cloud,
        &health_settings,
        (&balancer, &transport, &metrics),
        any_healthy,
        tasks,
    )
    .await;
    if let (Some(node), Some(_), false) = (&config.node_name, &multiplexer, config.cloud) {
        let following = pool::Following {
            proxy,
            node: node.clone(),
            port: config.leader_port,
            transport: transport.clone(),
            health: health_settings.clone(),
            metrics: metrics.clone(),
        };
        tasks.spawn(pool::follow(leaders.clone(), following, pool_name.clone()));
    } else {
        leaders.settle();
    }
    fleet(config, proxy, (&filters, &pool_name, &health), tasks)?;
    let collecting = upkeep::collect_garbage(cache.clone(), config.cache_gc_after, health.clone());
    tasks.spawn(collecting);
    // The node's NodeAutonomy condition, at the edge (a cloud node has no autonomy).
    if let (Some(node), false) = (&config.node_name, config.cloud) {
        let cache_metrics = cache.metrics().clone();
        let autonomy =
            crate::node::autonomy::run(proxy, node.clone(), cache_metrics, health.clone());
        tasks.spawn(autonomy);
    }
    let state = Arc::new(State {
        metrics,
        balancer,
        transport,
        local: Local {
            cache: cache.clone(),
            health: health.clone(),
            node_name: config.node_name.clone(),
            kubelet: health_settings.kubelet.clone(),
            min_request_timeout: config.min_request_timeout,
            filters: Some(filters.clone() as Arc<dyn LocalFilters>),
        },
        watch_ends: watch_end::WatchEnds {
            health,
            stopping,
            filters: filters.clone(),
            informers: informers.clone(),
        },
        cache,
        filters,
        informers,
        multiplexer,
        pool: pool::Pool {
            name: pool_name,
            leaders,
        },
        late_answer: config.health.timeout,
        in_flight: limit::InFlightLimit::new(config.max_requests_in_flight),
        known: caller::KnownCredentials::default(),
        certificates: identity.renewals,
        spool_dir: config.disk_cache_path.clone(),
    });
    Ok(state)
}

/// With `--filter-fleet`, the follower of the filters the cluster declares for the node, in
/// `tasks`.
fn fleet(
    config: &Config,
    proxy: SocketAddr,
    (filters, pool_name, health): (
        &Arc<Filters>,
        &watch::Receiver<Option<String>>,
        &HealthWatch,
    ),
    tasks: &Tasks,
) -> Result<(), ServerError> {
    if !config.filter_fleet {
        return Ok(());
    }
    let Some(node) = config.node_name.clone() else {
        tracing::error!(
            "--filter-fleet needs --node-name: the declaration says which nodes run what"
        );
        return Ok(());
    };
    let settings = crate::node::fleet::FleetSettings {
        node,
        store_dir: config
            .disk_cache_path
            .join(crate::node::fleet::IMAGE_STORE_DIR),
        registry: crate::registry::RegistrySettings {
            ca_file: config.filter_registry_ca.clone(),
            logins_file: config.filter_registry_config.clone(),
        },
    };
    let following = crate::node::fleet::follow(
        proxy,
        settings,
        filters.clone(),
        pool_name.clone(),
        health.clone(),
    );
    tasks.spawn(following.map_err(ServerError::Informers)?);
    Ok(())
}

/// The health checker's settings, from `config`; the cloud's version read from `cache`.
fn health_settings(config: &Config, cache: &Cache) -> HealthSettings {
    HealthSettings {
        interval: config.health.interval,
        timeout: config.health.timeout,
        failed_retry: config.health.failed_retry,
        healthy_threshold: config.health.healthy_threshold,
        node_name: config.node_name.clone(),
        kubelet: Arc::default(),
        cloud_version: cache.cloud_clock(),
    }
}

/// The filter that points pods at the HTTPS proxy on the hub interface.
const MASTERSERVICE: &str = "masterservice";

/// The pooled clients to the apiservers, on the identity's credentials: HTTP/2 offered by
/// ALPN with `--upstream-http2`.
fn upstream_transport(identity: &Identity, config: &Config) -> Transport {
    if config.upstream_http2 {
        tracing::info!("HTTP/2 offered to the apiservers (--upstream-http2)");
    }
    Transport::new(identity.credentials.clone(), config.request_timeout)
        .with_http2(config.upstream_http2)
}

/// The filter host's settings: the configuration's, with masterservice off where the hub's
/// address is not served.
fn filter_settings(
    config: &Config,
    hooks: Hooks,
    identity: &Identity,
    listeners: &Listeners,
) -> FilterSettings {
    let mut filters = upkeep::filter_settings(config, hooks);
    if let Some(why) = unserved_hub_address(config, identity, listeners) {
        tracing::warn!(
            "masterservice is off: {why}; kubelet keeps default/kubernetes as the cloud gives \
             it, so pods reach the apiserver directly"
        );
        filters.disabled.push(MASTERSERVICE.to_owned());
    }
    filters
}

/// Why pods told the hub's address would find nothing there, if they would: no HTTPS
/// proxy is served, or the hub interface it was to be served on could not be made.
/// masterservice and the HTTPS proxy come together or not at all.
fn unserved_hub_address(
    config: &Config,
    identity: &Identity,
    listeners: &Listeners,
) -> Option<&'static str> {
    if identity.secure_proxy.is_none() {
        Some(
            "no HTTPS proxy is served (no --tls-cert-file, and no certificate manager to request one)",
        )
    } else if config.hub_interface.is_some() && listeners.hub_interface.is_none() {
        Some("the hub interface could not be made")
    } else {
        None
    }
}

/// The node's pool, as `--nodepool-name` fixes it or as the node's label says, followed
/// in `tasks`.
fn pool_name(
    config: &Config,
    informers: &Option<Arc<Informers>>,
    filters: &Arc<Filters>,
    tasks: &Tasks,
) -> watch::Receiver<Option<String>> {
    let (pool_names, pool_name) = watch::channel(config.nodepool_name.clone());
    if let (Some(informers), Some(node), None) =
        (informers, &config.node_name, &config.nodepool_name)
    {
        let (informers, filters) = (informers.clone(), filters.clone());
        tasks.spawn(pool::follow_node_label(
            informers,
            filters,
            node.clone(),
            pool_names,
        ));
    } else {
        // The pool `--nodepool-name` fixed: held for as long as the app runs, since what
        // follows it (the leaders) stops when it is gone.
        tasks.spawn(async move { pool_names.closed().await });
    }
    pool_name
}

/// The cache: its store opened (a damaged file moved aside), its writer started, its
/// metrics registered.
async fn cache(config: &Config, metrics: &mut Metrics) -> Result<Arc<Cache>, ServerError> {
    let cache_metrics = CacheMetrics::default();
    cache_metrics.register(metrics.registry_mut());
    let store_dir = config.disk_cache_path.clone();
    let opened = cache_metrics.clone();
    let store = tokio::task::spawn_blocking(move || GuardedStore::open(&store_dir, opened))
        .await
        .map_err(|e| StoreError::Engine(Box::new(e)))??;
    tracing::info!(dir = %config.disk_cache_path.display(), "cache opened");
    // Cloud mode: a cloud node needs no answers for when the cloud is gone.
    let agents: &[String] = if config.cloud {
        &[]
    } else {
        &config.cache_agents
    };
    let cache = Cache::start(Arc::new(store), CachePolicy::new(agents), cache_metrics);
    cache.collect_after(config.cache_gc_after);
    Ok(cache)
}

/// The multiplexer, when some resources are pool-scope: one list and watch each, fed
/// through the gateway's proxy at `proxy` (or a pool leader), persisted in the cache.
fn multiplexer(
    config: &Config,
    proxy: SocketAddr,
    (cache, informers, leaders, health): (
        &Arc<Cache>,
        &Option<Arc<Informers>>,
        &Arc<pool::Leaders>,
        &HealthWatch,
    ),
    metrics: &mut Metrics,
) -> Result<Option<Arc<Multiplexer>>, ServerError> {
    if config.pool_scope_resources.is_empty() {
        return Ok(None);
    }
    let sources = multiplexer::Sources {
        configured: config.pool_scope_resources.clone(),
        named: leaders.pool_scope(),
        feeds: leaders.sources(),
        local: Some(cache.local_changes()),
        cloud: health.clone(),
    };
    let started = Multiplexer::start(
        proxy,
        Some(cache.store().clone()),
        sources,
        informers.as_ref().map(|informers| informers.changes()),
        metrics.registry_mut(),
    );
    Ok(Some(Arc::new(started.map_err(ServerError::Informers)?)))
}

/// Keeps `any_healthy`, whether some apiserver is healthy, by the health checker in `tasks`:
/// every server probed once before the gateway serves. In cloud mode, as YurtHub's, there is
/// no checker and every apiserver is taken as up.
async fn health_checks(
    cloud: bool,
    settings: &HealthSettings,
    (balancer, transport, metrics): (&Arc<Balancer>, &Transport, &Arc<Metrics>),
    any_healthy: watch::Sender<bool>,
    tasks: &Tasks,
) {
    if cloud {
        for server in balancer.servers() {
            server.set_healthy(true);
        }
        any_healthy.send_replace(true);
        tasks.spawn(async move { any_healthy.closed().await });
        return;
    }
    health::first_verdicts(balancer, transport, settings, metrics).await;
    any_healthy.send_replace(balancer.any_healthy());
    tasks.spawn(health::run(
        balancer.clone(),
        transport.clone(),
        settings.clone(),
        metrics.clone(),
        any_healthy,
    ));
}
