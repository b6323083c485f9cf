//! Following the pool's leaders: the ConfigMap of the node's pool, the leaders it names for
//! this node health-checked as the cloud's servers are (`GET /readyz` on the gateway's
//! identity), the set swapped whole at each change; and the pool-scope resources it names,
//! handed on to the multiplexer.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use tokio::sync::watch;

use super::leaders::LeaderHubs;
use crate::metrics::Metrics;
use crate::node::informer::follow_config_map;
use crate::node::multiplexer::Resource;
use crate::upstream::{Balancer, HealthSettings, LbMode, Transport, health};

/// The leaders this node's multiplexer feeds from, when it follows some.
#[derive(Debug)]
pub struct Leaders {
    current: ArcSwapOption<Balancer>,
    /// Counts the changes of the feeds' source: another set of leaders, or one healthy again.
    changes: watch::Sender<u64>,
    /// The pool-scope resources the pool's ConfigMap names (`None`: it names none).
    pool_scope: watch::Sender<Option<Vec<Resource>>>,
}

impl Default for Leaders {
    fn default() -> Leaders {
        Leaders {
            current: ArcSwapOption::empty(),
            changes: watch::channel(0).0,
            pool_scope: watch::channel(None).0,
        }
    }
}

impl Leaders {
    /// The leaders now (`None`: the feeds go to the cloud).
    pub fn current(&self) -> Option<Arc<Balancer>> {
        self.current.load_full()
    }

    /// Changes whenever the feeds should go to their source again (a feed's watch on the
    /// cloud is not held for minutes once a leader can answer it).
    pub fn sources(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Follows the pool-scope resources the pool names (`pool-scoped-metadata`).
    pub fn pool_scope(&self) -> watch::Receiver<Option<Vec<Resource>>> {
        self.pool_scope.subscribe()
    }

    /// Announces the source known, unless it was: no leaders will be followed.
    pub fn settle(&self) {
        self.changes.send_if_modified(|n| {
            let first = *n == 0;
            *n = (*n).max(1);
            first
        });
    }

    fn set(&self, leaders: Option<Arc<Balancer>>) {
        self.current.store(leaders);
        self.changes.send_modify(|n| *n += 1);
    }
}

/// The health checker of a set of leaders, aborted once the set is replaced.
struct Checker {
    task: tokio::task::JoinHandle<()>,
    leaders: Arc<Balancer>,
    metrics: Arc<Metrics>,
}

impl Checker {
    /// Stops checking, then takes the leaders out of `edgegate_upstream_healthy`.
    async fn stop(mut self) {
        self.task.abort();
        // Ended, the task can no longer set a verdict after the series are gone.
        let _ = (&mut self.task).await;
        health::forget(&self.leaders, &self.metrics);
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What following needs besides the ConfigMap.
pub struct Following {
    /// The gateway's proxy, which the ConfigMap is watched through.
    pub proxy: SocketAddr,
    /// This node's name.
    pub node: String,
    /// The leaders' pool port.
    pub port: u16,
    /// The gateway's identity, which the leaders are reached on.
    pub transport: Transport,
    /// The heartbeat knobs (probes ask `/readyz`).
    pub health: HealthSettings,
    /// Where the leaders' health is shown (`edgegate_upstream_healthy{server}`).
    pub metrics: Arc<Metrics>,
}

/// Follows the leaders of the pool `pool` names (re-read when it changes) into `leaders`,
/// for as long as the gateway runs.
pub async fn follow(
    leaders: Arc<Leaders>,
    following: Following,
    mut pool: watch::Receiver<Option<String>>,
) {
    let health = HealthSettings {
        node_name: None,
        ..following.health.clone()
    };
    loop {
        let name = pool.borrow_and_update().clone();
        let followed = async {
            match name {
                Some(name) => follow_pool(&leaders, &following, &health, &name).await,
                None => {
                    leaders.settle();
                    std::future::pending().await
                }
            }
        };
        tokio::select! {
            () = followed => return,
            changed = pool.changed() => if changed.is_err() { return },
        }
        leaders.set(None);
    }
}

/// The name of the ConfigMap that names `pool`'s leaders.
fn config_map_name(pool: &str) -> String {
    format!("leader-hub-{pool}")
}

/// Follows `leader-hub-<pool>`.
async fn follow_pool(
    leaders: &Arc<Leaders>,
    following: &Following,
    health: &HealthSettings,
    pool: &str,
) {
    let name = config_map_name(pool);
    let (mut seen, watching) = match follow_config_map(following.proxy, "leader-hub", &name) {
        Ok(followed) => followed,
        Err(error) => {
            tracing::warn!(%error, "cannot follow the pool's leaders: the multiplexer feeds from the cloud");
            leaders.settle();
            return std::future::pending().await;
        }
    };
    let applying = async {
        let mut followed: Vec<IpAddr> = Vec::new();
        let mut checker: Option<Checker> = None;
        while seen.changed().await.is_ok() {
            let hubs = LeaderHubs::from_data(seen.borrow_and_update().as_ref());
            leaders.pool_scope.send_if_modified(|named| {
                let changed = *named != hubs.pool_scope;
                if changed {
                    tracing::info!(%pool, resources = ?hubs.pool_scope, "the pool names its pool-scope resources");
                    named.clone_from(&hubs.pool_scope);
                }
                changed
            });
            let addresses = hubs.followed_by(&following.node);
            if addresses == followed {
                leaders.settle();
                continue;
            }
            tracing::info!(%pool, leaders = ?addresses, "the multiplexer feeds from {}", if addresses.is_empty() { "the cloud" } else { "the pool's leaders" });
            if let Some(checker) = checker.take() {
                checker.stop().await;
            }
            if addresses.is_empty() {
                leaders.set(None);
            } else {
                let urls = addresses
                    .iter()
                    .filter_map(|ip| {
                        format!("https://{}", SocketAddr::new(*ip, following.port))
                            .parse()
                            .ok()
                    })
                    .collect();
                let balancer = Arc::new(Balancer::new(urls, LbMode::Rr));
                let (transport, metrics) = (&following.transport, &following.metrics);
                health::first_verdicts(&balancer, transport, health, metrics).await;
                leaders.set(Some(balancer.clone()));
                let (any_healthy, mut healthy) = watch::channel(balancer.any_healthy());
                let checked = health::run(
                    balancer.clone(),
                    transport.clone(),
                    health.clone(),
                    metrics.clone(),
                    any_healthy,
                );
                let back = leaders.clone();
                let turned_healthy = async move {
                    while healthy.changed().await.is_ok() {
                        if *healthy.borrow_and_update() {
                            back.changes.send_modify(|n| *n += 1);
                        }
                    }
                };
                checker = Some(Checker {
                    task: tokio::spawn(async move {
                        tokio::join!(checked, turned_healthy);
                    }),
                    leaders: balancer,
                    metrics: metrics.clone(),
                });
            }
            followed = addresses;
        }
    };
    tokio::join!(watching, applying);
}
