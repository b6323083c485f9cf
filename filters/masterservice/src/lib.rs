//! `masterservice`: rewrites the `default/kubernetes` Service kubelet sees, so that the
//! `KUBERNETES_SERVICE_*` variables it gives pods (and the Service kube-proxy programs for
//! them) lead to the gateway: `spec.clusterIP` and `spec.clusterIPs` become the hub's host,
//! and the port named `https` its port. Every other Service passes untouched.
//!
//! Config (both optional): `{"host": "169.254.2.1", "port": 10268}`.

#[cfg(test)]
mod tests;

use edgegate_filter_sdk::kube::HubAddress;
use edgegate_filter_sdk::kube::hub::{API_PORT_NAME, API_SERVICE_NAME, API_SERVICE_NAMESPACE};
use edgegate_filter_sdk::{Context, Decision, Filter, IntoFilter, Manifest, Object, Verb};
use edgegate_filter_sdk::{export_filter, host};
use serde_json::{Value, json};

/// Rewrites run after the filters that drop or prune, on what is left.
const PRIORITY: i32 = 50;

/// The configured filter.
pub struct MasterService {
    hub: HubAddress,
    /// `spec.clusterIP` as rewritten: the hub's IP, formatted once.
    cluster_ip: Value,
    /// `spec.clusterIPs` as rewritten.
    cluster_ips: Value,
}

impl Filter for MasterService {
    type Config = HubAddress;

    fn manifest() -> Manifest {
        Manifest::new("masterservice", env!("CARGO_PKG_VERSION"))
            .matches("", &["services"], &[Verb::List, Verb::Watch])
            .components(&["kubelet"])
            .priority(PRIORITY)
            .config_schema(HubAddress::schema())
    }

    fn filter(&self, _ctx: &Context, service: &mut Object) -> Decision {
        if !service.is_named(API_SERVICE_NAMESPACE, API_SERVICE_NAME) {
            return Decision::Keep;
        }
        service.update("spec.clusterIP", self.cluster_ip.clone());
        service.update("spec.clusterIPs", self.cluster_ips.clone());
        self.hub
            .set_named_port(service, "spec.ports", API_PORT_NAME);
        if service.is_edited() {
            host::count("rewritten", 1);
        }
        Decision::Keep
    }
}

impl IntoFilter<MasterService> for HubAddress {
    fn into_filter(self) -> Result<MasterService, String> {
        let host = self.host();
        Ok(MasterService {
            hub: self,
            cluster_ip: json!(host),
            cluster_ips: json!([host]),
        })
    }
}

export_filter!(MasterService);
