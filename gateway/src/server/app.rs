//! The gateway as one app. [`App::build`] makes it from the configuration, one builder per
//! subsystem ([`build`]); [`App::spawn`] starts its listeners and background tasks, every
//! one of them in one tracker under one cancellation token; [`Running::shutdown`] stops it
//! all in one call: listeners first, then the tasks, then the requests in flight (within
//! the grace period), and the cache last.

mod build;
mod tasks;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use self::tasks::Tasks;
use super::hooks::Hooks;
use super::identity::Identity;
use super::listeners::Listeners;
use super::start_error::ServerError;
use super::state::State;
use super::{hub, listener, pool_port, proxy, upkeep};
use crate::cache::Cache;
use crate::config::Config;
use crate::reply::ResponseBody;

/// The gateway, built and not yet serving.
pub(super) struct App {
    config: Config,
    hooks: Hooks,
    /// The apiservers, as the identity has them (for the log line).
    servers: Vec<http::Uri>,
    listeners: Listeners,
    state: Arc<State>,
    cache: Arc<Cache>,
    tasks: Tasks,
    /// Told when the gateway begins to stop, so open watches end cleanly.
    stopping: watch::Sender<bool>,
}

/// The gateway, serving.
pub(super) struct Running {
    tasks: Tasks,
    listening: Tasks,
    graceful: Arc<GracefulShutdown>,
    grace: Duration,
    state: Arc<State>,
    cache: Arc<Cache>,
    stopping: watch::Sender<bool>,
}

impl App {
    /// Builds the gateway on `listeners`: its cache, informers, multiplexer, filters, pool,
    /// upstreams and their health, and the state every request is served with. The tasks
    /// of the subsystems that follow something (health, the pool, `yurt-hub-cfg`, garbage
    /// collection, …) start here, in the app's tracker.
    pub(super) async fn build(
        config: Config,
        identity: Identity,
        hooks: Hooks,
        listeners: Listeners,
    ) -> Result<App, ServerError> {
        let tasks = Tasks::default();
        let (stopping, stopping_rx) = watch::channel(false);
        let servers = identity.servers.clone();
        let built = build::Built {
            identity,
            hooks,
            stopping: stopping_rx,
        };
        let state = build::state(&config, built, &listeners, &tasks).await?;
        Ok(App {
            cache: state.cache.clone(),
            config,
            hooks,
            servers,
            listeners,
            state,
            tasks,
            stopping,
        })
    }

    /// Starts serving: the listeners, and the upkeep around them.
    pub(super) fn spawn(self) -> Running {
        let App {
            config,
            hooks,
            servers,
            listeners,
            state,
            cache,
            tasks,
            stopping,
        } = self;
        let Listeners {
            proxy,
            secure,
            hub,
            pool,
            hub_interface,
        } = listeners;
        tracing::info!(
            proxy = %shown(proxy.local_addr()),
            secure_proxy = %secure.first().map_or_else(|| "off".to_owned(), |(l, _)| shown(l.local_addr())),
            hub = %shown(hub.local_addr()),
            servers = ?servers.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "edgegate is serving"
        );
        for task in upkeep::upkeep(hooks, state.informers.clone(), state.multiplexer.clone()) {
            tasks.spawn(task);
        }
        // Stopped at exit, which leaves the link in place.
        if let Some(hub_interface) = hub_interface {
            tasks.spawn(hub_interface.keep());
        }
        for renewal in state.certificates.clone() {
            tasks.spawn(async move { renewal.run().await });
        }

        let graceful = Arc::new(GracefulShutdown::new());
        let listening = Tasks::default();
        listening.spawn(serving(proxy, None, &graceful, &state, proxy::handle));
        for (listener, tls) in secure {
            let handler = proxy::handle_secure;
            listening.spawn(serving(listener, Some(tls), &graceful, &state, handler));
        }
        listening.spawn(serving(hub, None, &graceful, &state, hub::handle));
        if let Some((listener, tls)) = pool {
            listening.spawn(serving(
                listener,
                Some(tls),
                &graceful,
                &state,
                pool_port::handle,
            ));
        }
        Running {
            tasks,
            listening,
            graceful,
            grace: config.shutdown_grace,
            state,
            cache,
            stopping,
        }
    }
}

impl Running {
    /// Stops the gateway: no new connections, open watches told to end, every task
    /// stopped, the requests in flight given the grace period, the cache closed.
    pub(super) async fn shutdown(self) {
        tracing::info!(grace = ?self.grace, "shutting down");
        self.listening.stop().await;
        self.stopping.send_replace(true);
        self.tasks.stop().await;
        match Arc::into_inner(self.graceful) {
            Some(graceful) => {
                if tokio::time::timeout(self.grace, graceful.shutdown())
                    .await
                    .is_err()
                {
                    tracing::warn!("in-flight requests outlived the grace period and were cut");
                }
            }
            None => tracing::warn!("a listener outlived the shutdown; requests in flight were cut"),
        }
        drop(self.state);
        let cache = self.cache;
        let _ = tokio::task::spawn_blocking(move || cache.close()).await;
    }
}

/// Serves `listener` (over `tls` when given) with `handler` and the app's state, every
/// connection registered with `graceful`.
fn serving<H, Fut>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    graceful: &Arc<GracefulShutdown>,
    state: &Arc<State>,
    handler: H,
) -> impl Future<Output = ()> + Send + 'static
where
    H: Fn(Arc<State>, Request<Incoming>, SocketAddr) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<ResponseBody>> + Send + 'static,
{
    let (graceful, state) = (graceful.clone(), state.clone());
    async move {
        let handler = move |request, peer| handler(state.clone(), request, peer);
        listener::serve(listener, tls, &graceful, handler).await;
    }
}

fn shown(addr: std::io::Result<SocketAddr>) -> String {
    addr.map_or_else(|e| e.to_string(), |a| a.to_string())
}
