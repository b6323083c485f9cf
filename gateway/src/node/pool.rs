//! A leader hub per node pool, as YurtHub v1.7's. OpenYurt's yurt-manager elects a pool's
//! leaders (NodePool v1beta2 `enableLeaderElection`, `leaderReplicas`) and writes them into
//! `kube-system/leader-hub-<pool>` (`leaders`: `node/address,…`, `enable-leader-election`);
//! no gateway elects anything itself.
//!
//! - A follower (election on, leaders named, this node not among them) has its
//!   multiplexer's feeds list and watch from a healthy leader's pool port
//!   (`https://<address>:<--multiplexer-port>`, on this node's client certificate), and
//!   from the cloud while no leader answers: [`Leaders`].
//! - Every gateway with `--node-ip` serves the pool port: the lists and watches of its
//!   multiplexer's resources, unfiltered, to client certificates of the nodes of its own
//!   pool (`system:node:<name>`, group `system:nodes`, the node labelled with this pool),
//!   and `/readyz` for the followers' health checks.
//! - The ConfigMap's `pool-scoped-metadata` (the NodePool's `poolScopeMetadata`), when
//!   there, names the multiplexer's resources on every node of the pool, in place of
//!   `--pool-scope-resources`.

mod follow;
mod leaders;

use std::sync::Arc;

use tokio::sync::watch;

pub use follow::{Following, Leaders, follow};

use crate::filter::Filters;
use crate::node::informer::Informers;

/// The label naming a node's pool.
pub const NODEPOOL_LABEL: &str = "apps.openyurt.io/nodepool";

/// This node's pool, and the leaders its feeds follow.
pub struct Pool {
    /// The pool's name, as `--nodepool-name` fixes it or the node's label says.
    pub name: watch::Receiver<Option<String>>,
    /// The leaders the multiplexer's feeds go to, when it follows some.
    pub leaders: Arc<Leaders>,
}

/// Keeps `names` (and the pool filters see) equal to node `node`'s pool label, for as long
/// as the informers run.
pub async fn follow_node_label(
    informers: Arc<Informers>,
    filters: Arc<Filters>,
    node: String,
    names: watch::Sender<Option<String>>,
) {
    let mut changes = informers.changes();
    // The first lists announce nothing ([`Informers::until_synced`]): their end is a change.
    let mut synced = informers.sync_state();
    let mut syncing = !*synced.borrow_and_update();
    loop {
        let pool = informers.node_label(&node, NODEPOOL_LABEL);
        if pool != filters.node_pool() {
            tracing::info!(%node, pool = ?pool, "this node's pool");
            filters.set_node_pool(pool.clone());
        }
        names.send_if_modified(|name| std::mem::replace(name, pool.clone()) != pool);
        // Any change (or changes missed) may be this node's label.
        tokio::select! {
            change = changes.recv() => {
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = change {
                    return;
                }
            }
            listed = synced.wait_for(|synced| *synced), if syncing => {
                syncing = false;
                if listed.is_err() {
                    return;
                }
            }
        }
    }
}
