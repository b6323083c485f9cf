//! The node-level services: what runs once for the whole node beside the requests it serves.
//!
//! - `informer`: the objects filters look up, kept by the gateway's own informers.
//! - `multiplexer`: one upstream list and watch per pool-scope resource for the whole node,
//!   every local client's list and watch answered from that shared state.
//! - `pool`: the pool's leader hubs, as yurt-manager names them: a follower's feeds from a
//!   leader, the cloud while none answers.
//! - `autonomy`: the node's `NodeAutonomy` condition, kept through the gateway itself.
//! - `hubcfg`: YurtHub's `yurt-hub-cfg` ConfigMap, followed.
//! - `fleet`: the filters the cluster declares for the node, pulled, run, and reported.

pub(crate) mod autonomy;
pub(crate) mod fleet;
pub(crate) mod hubcfg;
pub(crate) mod informer;
pub(crate) mod multiplexer;
pub(crate) mod pool;
