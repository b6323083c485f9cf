//! `nodeportisolation`: shows kube-proxy a NodePort or LoadBalancer Service annotated
//! `nodeport.openyurt.io/listen` only on nodes of the pools the annotation opens (see
//! [`ListenPools`] for `foo,-bar,*`), so its node ports are not opened elsewhere. A node in
//! no pool, a Service without the annotation, or a Service of another type: untouched.
//!
//! It takes no config; the node's pool is the gateway's `--nodepool-name`.

#[cfg(test)]
mod tests;

use edgegate_filter_sdk::kube::{ListenPools, ServiceType};
use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb};
use edgegate_filter_sdk::{export_filter, host};
use serde::Deserialize;

/// Drops run first, so later filters do no work on what is dropped.
const PRIORITY: i32 = 20;

/// The filter; it takes no config.
#[derive(Deserialize)]
pub struct NodePortIsolation;

impl Filter for NodePortIsolation {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("nodeportisolation", env!("CARGO_PKG_VERSION"))
            .matches("", &["services"], &[Verb::List, Verb::Watch])
            .components(&["kube-proxy"])
            .priority(PRIORITY)
            .no_config()
    }

    fn filter(&self, ctx: &Context, service: &mut Object) -> Decision {
        if !ServiceType::of(service).opens_node_ports() {
            return Decision::Keep;
        }
        let Some(listen) = ListenPools::of(service) else {
            return Decision::Keep;
        };
        // A node in no pool behaves as in plain Kubernetes: every node port is open.
        let Some(pool) = ctx.node_pool.as_deref().filter(|pool| !pool.is_empty()) else {
            return Decision::Keep;
        };
        if listen.admits(pool) {
            return Decision::Keep;
        }
        host::count("isolated", 1);
        Decision::Drop
    }
}

export_filter!(NodePortIsolation);
