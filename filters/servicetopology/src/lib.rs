//! `servicetopology`: shows node clients only the endpoints of a Service that are near
//! enough, as the Service's `openyurt.io/topologyKeys` annotation asks:
//! `kubernetes.io/hostname` keeps the endpoints on this node; `openyurt.io/nodepool` or
//! `kubernetes.io/zone` keeps those in this node's pool (this node alone when it is in no
//! pool). A Service without the annotation, or unknown to the gateway, keeps all its
//! endpoints. An object left with no endpoints is still sent, so clients drop the old ones.
//!
//! Unlike YurtHub, it filters core v1 `Endpoints` as well as EndpointSlices (#2613).
//!
//! # Layout
//! - `lookups`: the Services and pool members one call looks up, each looked up once.

mod lookups;
#[cfg(test)]
mod tests;

use edgegate_filter_sdk::kube::{EndpointsKind, Topology};
use edgegate_filter_sdk::{Context, Decision, Filter, Level, Manifest, Object, Verb};
use edgegate_filter_sdk::{export_filter, host};
use serde::Deserialize;

use lookups::Lookups;

/// After the filters that drop whole Services (which spares pruning what is dropped anyway)
/// and before those that rewrite endpoints to point at the gateway, whose endpoint has no
/// node and would be pruned.
const PRIORITY: i32 = 30;

/// The filter; it takes no config.
#[derive(Deserialize)]
pub struct ServiceTopology;

impl Filter for ServiceTopology {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("servicetopology", env!("CARGO_PKG_VERSION"))
            .matches(
                "discovery.k8s.io",
                &["endpointslices"],
                &[Verb::List, Verb::Watch],
            )
            .matches("", &["endpoints"], &[Verb::List, Verb::Watch])
            .components(&["kube-proxy", "coredns", "nginx-ingress-controller"])
            .priority(PRIORITY)
            .no_config()
    }

    fn filter(&self, ctx: &Context, object: &mut Object) -> Decision {
        prune(ctx, object, &mut Lookups::default())
    }

    fn filter_batch(&self, ctx: &Context, objects: &mut [Object]) -> Vec<Decision> {
        // The slices of one list share Services and the pool: look each up once.
        let mut lookups = Lookups::default();
        objects
            .iter_mut()
            .map(|object| prune(ctx, object, &mut lookups))
            .collect()
    }
}

/// Removes the endpoints of `object` that its Service's topology puts out of reach.
fn prune(ctx: &Context, object: &mut Object, lookups: &mut Lookups) -> Decision {
    let Some(kind) = EndpointsKind::of(ctx) else {
        return Decision::Keep;
    };
    let Some(topology) = lookups.topology(kind, object) else {
        return Decision::Keep;
    };
    let node = ctx.node_name.as_str();
    let pool = ctx.node_pool.as_deref().filter(|pool| !pool.is_empty());
    let removed = match (topology, pool) {
        (Topology::Pool, Some(pool)) => {
            let Some(members) = lookups.members(pool) else {
                // YurtHub too leaves the object alone when it cannot tell the pool's nodes:
                // all endpoints beat none while the gateway's view of the pool is missing.
                lookups.warn_once(&format!(
                    "no NodePool {pool} and no node labelled for it: endpoints left unfiltered"
                ));
                host::count("pool-unknown", 1);
                return Decision::Keep;
            };
            // This node is in the pool even while the NodePool's status has not caught up.
            kind.retain_by_node(object, |n| n == node || members.contains(n))
        }
        // A node in no pool keeps to itself, as in YurtHub.
        _ => kind.retain_by_node(object, |n| n == node),
    };
    if !removed {
        return Decision::Keep;
    }
    host::count("pruned", 1);
    if host::log_enabled(Level::Debug) {
        host::log(
            Level::Debug,
            &format!(
                "pruned the endpoints of {}/{} to {topology:?} topology",
                object.namespace().unwrap_or_default(),
                object.name().unwrap_or_default()
            ),
        );
    }
    Decision::Keep
}

export_filter!(ServiceTopology);
