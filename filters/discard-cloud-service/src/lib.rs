//! `discard-cloud-service`: hides from kube-proxy the Services that only work in the cloud,
//! so edge nodes do not program rules that lead nowhere: LoadBalancer Services annotated
//! `svc.openyurt.io/discard: "true"`, and the tunnel server's internal Service
//! `kube-system/x-tunnel-server-internal-svc`. Everything else passes untouched.
//!
//! YurtHub calls this filter `discardcloudservice`. It takes no config.

#[cfg(test)]
mod tests;

use edgegate_filter_sdk::kube::ServiceType;
use edgegate_filter_sdk::kube::annotations::flag;
use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb};
use edgegate_filter_sdk::{export_filter, host};
use serde::Deserialize;

/// The annotation that marks a LoadBalancer Service as the cloud's alone.
pub const DISCARD: &str = "svc.openyurt.io/discard";

/// The tunnel server's Service, reachable only from the cloud.
const TUNNEL_SERVICE: (&str, &str) = ("kube-system", "x-tunnel-server-internal-svc");

/// Drops run first, so later filters do no work on what is dropped.
const PRIORITY: i32 = 10;

/// The filter; it takes no config.
#[derive(Deserialize)]
pub struct DiscardCloudService;

impl Filter for DiscardCloudService {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("discard-cloud-service", env!("CARGO_PKG_VERSION"))
            .matches("", &["services"], &[Verb::List, Verb::Watch])
            .components(&["kube-proxy"])
            .priority(PRIORITY)
            .no_config()
    }

    fn filter(&self, _ctx: &Context, service: &mut Object) -> Decision {
        // The annotation first: it is read from the bytes up to it, where `spec.type` needs
        // the Service split, so a Service without it is kept having read only its metadata.
        let discarded =
            flag(service, DISCARD) && ServiceType::of(service) == ServiceType::LoadBalancer;
        if discarded || service.is_named(TUNNEL_SERVICE.0, TUNNEL_SERVICE.1) {
            host::count("discarded", 1);
            return Decision::Drop;
        }
        Decision::Keep
    }
}

export_filter!(DiscardCloudService);
