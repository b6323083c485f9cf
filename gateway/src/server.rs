//! The gateway's servers: the proxy listener, the hub listener, and the state each request
//! is served with. [`run`] is the whole gateway.

mod activity;
mod caller;
mod failover;
#[cfg(feature = "fuzzing")]
mod fuzz_hub;
mod headers;
mod hub;
mod limit;
mod listener;
mod local_filters;
mod metered;
mod plan;
mod pool_port;
mod proxy;
mod proxy_error;
mod respond;
mod route;
mod state;
mod unless_lost;
mod upgrade;
mod upkeep;
mod watch_end;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::server::graceful::GracefulShutdown;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cache::{Cache, CacheMetrics, CachePolicy, GuardedStore, StoreError};
use crate::config::Config;
use crate::filter::{FilterError, Filters, Lookup, NoLookup};
use crate::hub_link::HubInterface;
use crate::informer::Informers;
use crate::local::Local;
use crate::metrics::Metrics;
use crate::multiplexer::{self, Multiplexer};
use crate::pool;
use crate::upstream::{Balancer, Transport, health};
use state::State;

pub use upkeep::RETURN_FREED_EVERY;

pub use crate::reply::ResponseBody;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use fuzz_hub::{HubFixture, SECRET_VALUE};
pub use proxy_error::ProxyError;

/// Why the gateway could not start.
#[derive(Debug, Error)]
pub enum ServerError {
    /// A listener could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The cache could not be opened: another process holds it (a damaged one is replaced).
    #[error(transparent)]
    Cache(#[from] StoreError),
    /// The filter runtime could not start.
    #[error(transparent)]
    Filters(#[from] FilterError),
    /// The informers behind filter lookups could not start.
    #[error("cannot start the informers (filter lookups, yurt-hub-cfg)")]
    Informers(#[source] kube::Error),
}

/// The bound listeners; bind them first to learn the ports (tests bind port 0).
pub struct Listeners {
    proxy: TcpListener,
    /// The HTTPS proxy, when served: on --bind-proxy-address, and on the hub interface's
    /// address when it was made.
    secure: Vec<(TcpListener, tokio_rustls::TlsAcceptor)>,
    hub: TcpListener,
    /// The pool port, when served (--node-ip).
    pool: Option<(TcpListener, tokio_rustls::TlsAcceptor)>,
    /// The hub interface, to be kept while the gateway runs (when it was made).
    hub_interface: Option<HubInterface>,
}

/// Connections the kernel completes and queues before the gateway accepts them: as many as
/// `somaxconn` allows (4 096 by default), as Go's listeners ask, so that the components of a
/// node reconnecting at once (a restart, a link back) are queued, not made to retry their
/// SYNs for seconds. tokio's default is 1 024.
const BACKLOG: u32 = 4096;

/// A listener on `addr`, with [`BACKLOG`] and `SO_REUSEADDR` (a restart rebinds while the
/// old connections linger in TIME_WAIT).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

impl Listeners {
    /// Binds the proxy and hub addresses of `config`.
    pub async fn bind(config: &Config) -> Result<Listeners, ServerError> {
        let bind = |addr: SocketAddr| async move {
            listen(addr).map_err(|source| ServerError::Bind { addr, source })
        };
        let mut secure = Vec::new();
        let mut hub_interface = None;
        if let Some((addr, tls)) = &config.secure_proxy {
            let tls = tokio_rustls::TlsAcceptor::from(tls.clone());
            secure.push((bind(*addr).await?, tls.clone()));
            hub_interface = make_hub_interface(config);
            if let Some(made) = &hub_interface
                // A wildcard --bind-proxy-address already covers the hub's address.
                && !addr.ip().is_unspecified()
                && addr.ip() != made.ip()
            {
                let on_hub = SocketAddr::new(made.ip(), addr.port());
                secure.push((bind(on_hub).await?, tls));
            }
        } else if let Some(settings) = &config.hub_interface {
            tracing::info!(
                name = %settings.name,
                "no hub interface: the HTTPS proxy is not served (no --tls-cert-file)"
            );
        }
        let pool = match &config.pool_port {
            Some((addr, tls)) => Some((bind(*addr).await?, tls.clone().into())),
            None => None,
        };
        Ok(Listeners {
            proxy: bind(config.proxy_addr).await?,
            secure,
            hub: bind(config.hub_addr).await?,
            pool,
            hub_interface,
        })
    }

    /// The address the proxy listens on.
    pub fn proxy_addr(&self) -> std::io::Result<SocketAddr> {
        self.proxy.local_addr()
    }

    /// The address the HTTPS proxy listens on (on --bind-proxy-address), when it is served.
    pub fn secure_proxy_addr(&self) -> Option<std::io::Result<SocketAddr>> {
        self.secure
            .first()
            .map(|(listener, _)| listener.local_addr())
    }

    /// The address the hub server listens on.
    pub fn hub_addr(&self) -> std::io::Result<SocketAddr> {
        self.hub.local_addr()
    }
}

/// Makes the hub interface of `config`, if asked for; a failure (no `CAP_NET_ADMIN`) is
/// logged and leaves the HTTPS proxy on --bind-proxy-address alone.
fn make_hub_interface(config: &Config) -> Option<HubInterface> {
    let settings = config.hub_interface.as_ref()?;
    let made = HubInterface::open(&settings.name, settings.ip).and_then(|hub| {
        let ensured = hub.ensure();
        ensured.map(|ensured| (hub, ensured))
    });
    match made {
        Ok((hub, ensured)) => {
            tracing::info!(
                name = %settings.name, ip = %settings.ip,
                made = ensured.link_created, address_added = ensured.address_added,
                "hub interface ready"
            );
            Some(hub)
        }
        Err(error) => {
            tracing::error!(
                error = %crate::error::error_chain(&error),
                "no hub interface (it needs CAP_NET_ADMIN): pods cannot reach the gateway at \
                 its address; the HTTPS proxy serves on --bind-proxy-address only"
            );
            None
        }
    }
}

/// Runs the gateway until `shutdown` resolves, then gives in-flight requests the configured
/// grace period.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
    let listeners = Listeners::bind(&config).await?;
    serve(config, listeners, shutdown).await
}

/// Runs the gateway on already bound listeners until `shutdown` resolves.
pub async fn serve(
    mut config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let mut metrics = Metrics::new();
    let cache_metrics = CacheMetrics::default();
    cache_metrics.register(metrics.registry_mut());
    let store_dir = config.disk_cache_path.clone();
    let opened = cache_metrics.clone();
    let store = tokio::task::spawn_blocking(move || GuardedStore::open(&store_dir, opened))
        .await
        .map_err(|e| StoreError::Engine(Box::new(e)))??;
    tracing::info!(dir = %config.disk_cache_path.display(), "cache opened");
    let cache = Cache::start(
        Arc::new(store),
        // Cloud mode: a cloud node needs no answers for when the cloud is gone.
        CachePolicy::new(if config.cloud {
            &[]
        } else {
            &config.cache_agents[..]
        }),
        cache_metrics,
    );
    cache.collect_after(config.cache_gc_after);
    config.health.cloud_version = cache.cloud_clock();
    // Informers serve filters' lookups, and the pool port's check of its callers' pool.
    let informers = if config.filter_dir.is_some() || config.pool_port.is_some() {
        let proxy = listeners.proxy_addr().map_err(|source| ServerError::Bind {
            addr: config.proxy_addr,
            source,
        })?;
        Some(Arc::new(
            Informers::start(proxy, Some(cache.store().clone())).map_err(ServerError::Informers)?,
        ))
    } else {
        None
    };
    let leaders = Arc::new(pool::Leaders::default());
    let multiplexer = if config.pool_scope_resources.is_empty() {
        None
    } else {
        let proxy = listeners.proxy_addr().map_err(|source| ServerError::Bind {
            addr: config.proxy_addr,
            source,
        })?;
        Some(Arc::new(
            Multiplexer::start(
                proxy,
                Some(cache.store().clone()),
                multiplexer::Sources {
                    configured: config.pool_scope_resources.clone(),
                    named: leaders.pool_scope(),
                    feeds: leaders.sources(),
                    local: Some(cache.local_changes()),
                },
                informers.as_ref().map(|informers| informers.changes()),
                metrics.registry_mut(),
            )
            .map_err(ServerError::Informers)?,
        ))
    };
    let lookup: Arc<dyn Lookup> = match &informers {
        Some(informers) => informers.clone(),
        None => Arc::new(NoLookup),
    };
    let filters =
        Arc::new(Filters::start(upkeep::filter_settings(&config), lookup, &mut metrics).await?);
    let (pool_names, pool_name) = watch::channel(config.nodepool_name.clone());
    let pool_follower = match (&informers, &config.node_name, &config.nodepool_name) {
        (Some(informers), Some(node), None) => Some(tokio::spawn(pool::follow_node_label(
            informers.clone(),
            filters.clone(),
            node.clone(),
            pool_names,
        ))),
        _ => None,
    };
    if let Some(hub_interface) = &listeners.hub_interface {
        hub_interface.register(metrics.registry_mut());
    }
    let proxy_addr = listeners.proxy_addr().map_err(|source| ServerError::Bind {
        addr: config.proxy_addr,
        source,
    })?;
    // Cloud mode caches nothing, whatever yurt-hub-cfg adds.
    let hub_config = crate::hubcfg::follow(
        proxy_addr,
        (!config.cloud).then(|| cache.clone()),
        filters.clone(),
    )
    .map_err(ServerError::Informers)?;
    let metrics = Arc::new(metrics);

    let transport = Transport::new(config.credentials.clone(), config.request_timeout);
    let balancer = Arc::new(Balancer::new(config.servers.clone(), config.lb_mode));
    let (health_tx, health_rx) = watch::channel(false);
    let checker = if config.cloud {
        // Cloud mode, as YurtHub's: no health checker; every apiserver is taken as up.
        for server in balancer.servers() {
            server.set_healthy(true);
        }
        health_tx.send_replace(true);
        tokio::spawn(async move { health_tx.closed().await })
    } else {
        health::first_verdicts(&balancer, &transport, &config.health, &metrics).await;
        health_tx.send_replace(balancer.any_healthy());
        tokio::spawn(health::run(
            balancer.clone(),
            transport.clone(),
            config.health.clone(),
            metrics.clone(),
            health_tx,
        ))
    };
    let leader_follower = match (&config.node_name, &multiplexer) {
        (Some(node), Some(_)) if !config.cloud => Some(tokio::spawn(pool::follow(
            leaders.clone(),
            pool::Following {
                proxy: proxy_addr,
                node: node.clone(),
                port: config.leader_port,
                transport: transport.clone(),
                health: config.health.clone(),
                metrics: metrics.clone(),
            },
            pool_name.clone(),
        ))),
        _ => {
            leaders.settle();
            None
        }
    };
    let collector = tokio::spawn(upkeep::collect_garbage(
        cache.clone(),
        config.cache_gc_after,
        health_rx.clone(),
    ));
    // The node's NodeAutonomy condition, at the edge (a cloud node has no autonomy).
    let autonomy = match (&config.node_name, config.cloud, listeners.proxy_addr()) {
        (Some(node), false, Ok(proxy)) => Some(tokio::spawn(crate::autonomy::run(
            proxy,
            node.clone(),
            cache.metrics().clone(),
            health_rx.clone(),
        ))),
        _ => None,
    };
    let (stopping_tx, stopping_rx) = watch::channel(false);
    let state = Arc::new(State {
        metrics,
        balancer,
        transport,
        local: Local {
            cache: cache.clone(),
            health: health_rx.clone(),
            node_name: config.node_name.clone(),
            kubelet: config.health.kubelet.clone(),
            min_request_timeout: config.min_request_timeout,
            filters: Some(filters.clone() as Arc<dyn crate::local::LocalFilters>),
        },
        watch_ends: watch_end::WatchEnds {
            health: health_rx,
            stopping: stopping_rx,
            filters: filters.clone(),
            informers: informers.clone(),
        },
        cache: cache.clone(),
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
        certificates: config.certificate_renewals.clone(),
    });

    tracing::info!(
        proxy = %display_addr(listeners.proxy_addr()),
        secure_proxy = %listeners.secure_proxy_addr().map_or_else(|| "off".to_owned(), display_addr),
        hub = %display_addr(listeners.hub_addr()),
        servers = ?config.servers.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "edgegate is serving"
    );
    let upkeep = upkeep::spawn_upkeep(&config, state.informers.clone());
    // Dropped at exit, which leaves the link in place.
    let hub_interface = listeners.hub_interface.map(|hub| tokio::spawn(hub.keep()));
    let renewals: Vec<_> = config
        .certificate_renewals
        .iter()
        .cloned()
        .map(|renewal| tokio::spawn(async move { renewal.run().await }))
        .collect();
    let graceful = GracefulShutdown::new();
    {
        let proxy_state = state.clone();
        let proxy_handler = move |request, peer| proxy::handle(proxy_state.clone(), request, peer);
        let proxy = listener::serve(listeners.proxy, None, &graceful, proxy_handler);
        let secure_state = state.clone();
        let secure_handler =
            move |request, peer| proxy::handle_secure(secure_state.clone(), request, peer);
        let secure =
            futures_util::future::join_all(listeners.secure.into_iter().map(|(listener, tls)| {
                listener::serve(listener, Some(tls), &graceful, secure_handler.clone())
            }));
        let secure = async {
            secure.await;
            std::future::pending::<()>().await
        };
        let hub_state = state.clone();
        let hub = listener::serve(listeners.hub, None, &graceful, move |request, peer| {
            hub::handle(hub_state.clone(), request, peer)
        });
        let pool_state = state.clone();
        let pool = async {
            match listeners.pool {
                Some((listener, tls)) => {
                    let handler =
                        move |request, peer| pool_port::handle(pool_state.clone(), request, peer);
                    listener::serve(listener, Some(tls), &graceful, handler).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = proxy => {}
            _ = secure => {}
            _ = hub => {}
            _ = pool => {}
            _ = shutdown => {}
        }
    }
    tracing::info!(grace = ?config.shutdown_grace, "shutting down");
    stopping_tx.send_replace(true);
    checker.abort();
    collector.abort();
    if let Some(keeper) = hub_interface {
        keeper.abort();
    }
    for task in upkeep.into_iter().chain(renewals) {
        task.abort();
    }
    for task in [pool_follower, leader_follower, autonomy]
        .into_iter()
        .flatten()
    {
        task.abort();
    }
    hub_config.abort();
    if tokio::time::timeout(config.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests outlived the grace period and were cut");
    }
    drop(state);
    let _ = tokio::task::spawn_blocking(move || cache.close()).await;
    Ok(())
}

fn display_addr(addr: std::io::Result<SocketAddr>) -> String {
    addr.map_or_else(|e| e.to_string(), |a| a.to_string())
}
