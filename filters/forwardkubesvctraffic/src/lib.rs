//! `forwardkubesvctraffic`: rewrites the EndpointSlice of the `default/kubernetes` Service
//! that kube-proxy sees, so the Service's traffic from this node goes to the gateway: one
//! ready endpoint at the hub's host, and the port named `https` at the hub's port. Every
//! other slice passes untouched.
//!
//! Config (both optional): `{"host": "169.254.2.1", "port": 10268}`.

#[cfg(test)]
mod tests;

use edgegate_filter_sdk::kube::HubAddress;
use edgegate_filter_sdk::kube::hub::{API_PORT_NAME, API_SERVICE_NAME, API_SERVICE_NAMESPACE};
use edgegate_filter_sdk::kube::{EndpointsKind, service::service_name};
use edgegate_filter_sdk::{Context, Decision, Filter, Level, Manifest, Object, Verb};
use edgegate_filter_sdk::{export_filter, host};
use serde::Deserialize;
use serde_json::{Value, json};

/// Rewrites run after the filters that drop or prune: `servicetopology` would otherwise
/// prune the hub's endpoint, which runs on no node.
const PRIORITY: i32 = 50;

/// The configured filter: its config is the hub's address.
#[derive(Deserialize)]
#[serde(transparent)]
pub struct ForwardKubeSvcTraffic {
    hub: HubAddress,
}

impl Filter for ForwardKubeSvcTraffic {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("forwardkubesvctraffic", env!("CARGO_PKG_VERSION"))
            .matches(
                "discovery.k8s.io",
                &["endpointslices"],
                &[Verb::List, Verb::Watch],
            )
            .components(&["kube-proxy"])
            .priority(PRIORITY)
            .config_schema(HubAddress::schema())
    }

    fn filter(&self, ctx: &Context, slice: &mut Object) -> Decision {
        let Some(kind) = EndpointsKind::of(ctx).filter(|kind| kind.is_slice()) else {
            return Decision::Keep;
        };
        if slice.namespace() != Some(API_SERVICE_NAMESPACE)
            || service_name(kind, slice) != Some(API_SERVICE_NAME)
        {
            return Decision::Keep;
        }
        // A slice holds addresses of one family; the hub's in the other family's slice
        // would be invalid (YurtHub leaves such a slice alone too).
        let address_type = slice.get("addressType").and_then(Value::as_str);
        if address_type != Some(self.hub.address_type()) {
            host::log(
                Level::Warn,
                &format!(
                    "slice {} holds {} addresses, the hub's host {} is not one: left alone",
                    slice.name().unwrap_or_default(),
                    address_type.unwrap_or("unknown"),
                    self.hub.ip
                ),
            );
            host::count("address-type-mismatch", 1);
            return Decision::Keep;
        }
        let endpoints = json!([{"addresses": [self.hub.host()], "conditions": {"ready": true}}]);
        self.hub.set_named_port(slice, "ports", API_PORT_NAME);
        slice.update("endpoints", endpoints);
        if slice.is_edited() {
            host::count("rewritten", 1);
        }
        Decision::Keep
    }
}

export_filter!(ForwardKubeSvcTraffic);
