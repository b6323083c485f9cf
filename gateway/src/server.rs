//! The gateway's servers: the proxy listener, the hub listener, and the state each request
//! is served with. [`run`] is the whole gateway.

mod headers;
mod hub;
mod listener;
mod metered;
mod proxy;
mod status;
mod upgrade;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use hyper_util::server::graceful::GracefulShutdown;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::Config;
use crate::metrics::Metrics;
use crate::upstream::{Balancer, BoxError, HealthWatch, Transport, health};

pub use status::{ProxyError, status_response};

/// The body of every response the gateway sends.
pub type ResponseBody = UnsyncBoxBody<Bytes, BoxError>;

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
}

/// What every request is served with.
pub(crate) struct State {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) balancer: Arc<Balancer>,
    pub(crate) transport: Transport,
    /// "Some apiserver is healthy", and its changes.
    #[allow(dead_code)]
    pub(crate) health: HealthWatch,
}

/// The bound listeners; bind them first to learn the ports (tests bind port 0).
pub struct Listeners {
    proxy: TcpListener,
    hub: TcpListener,
}

impl Listeners {
    /// Binds the proxy and hub addresses of `config`.
    pub async fn bind(config: &Config) -> Result<Listeners, ServerError> {
        let bind = |addr: SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| ServerError::Bind { addr, source })
        };
        Ok(Listeners {
            proxy: bind(config.proxy_addr).await?,
            hub: bind(config.hub_addr).await?,
        })
    }

    /// The address the proxy listens on.
    pub fn proxy_addr(&self) -> std::io::Result<SocketAddr> {
        self.proxy.local_addr()
    }

    /// The address the hub server listens on.
    pub fn hub_addr(&self) -> std::io::Result<SocketAddr> {
        self.hub.local_addr()
    }
}

/// Runs the gateway until `shutdown` resolves, then gives in-flight requests the configured
/// grace period.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
    let listeners = Listeners::bind(&config).await?;
    serve(config, listeners, shutdown).await;
    Ok(())
}

/// Runs the gateway on already bound listeners until `shutdown` resolves.
pub async fn serve(config: Config, listeners: Listeners, shutdown: impl Future<Output = ()>) {
    let metrics = Arc::new(Metrics::new());
    let transport = Transport::new(config.credentials.clone(), config.request_timeout);
    let balancer = Arc::new(Balancer::new(config.servers.clone(), config.lb_mode));
    health::first_verdicts(&balancer, &transport, &config.health, &metrics).await;
    let (health_tx, health_rx) = watch::channel(balancer.any_healthy());
    let checker = tokio::spawn(health::run(
        balancer.clone(),
        transport.clone(),
        config.health,
        metrics.clone(),
        health_tx,
    ));
    let state = Arc::new(State {
        metrics,
        balancer,
        transport,
        health: health_rx,
    });

    tracing::info!(
        proxy = %display_addr(listeners.proxy_addr()),
        hub = %display_addr(listeners.hub_addr()),
        servers = ?config.servers.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "edgegate is serving"
    );
    let graceful = GracefulShutdown::new();
    {
        let proxy_state = state.clone();
        let proxy = listener::serve(listeners.proxy, &graceful, move |request, peer| {
            proxy::handle(proxy_state.clone(), request, peer)
        });
        let hub_state = state.clone();
        let hub = listener::serve(listeners.hub, &graceful, move |request, _peer| {
            hub::handle(hub_state.clone(), request)
        });
        tokio::select! {
            _ = proxy => {}
            _ = hub => {}
            _ = shutdown => {}
        }
    }
    tracing::info!(grace = ?config.shutdown_grace, "shutting down");
    checker.abort();
    if tokio::time::timeout(config.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests outlived the grace period and were cut");
    }
}

fn display_addr(addr: std::io::Result<SocketAddr>) -> String {
    addr.map_or_else(|e| e.to_string(), |a| a.to_string())
}
