//! `serviceenvupdater`: in the pods kubelet fetches, overwrites the values of the
//! `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` variables that a container or an
//! init container sets itself (CNI plugins do, to reach the API before Services work), with
//! the hub's host and port, so those pods too go through the gateway. Variables a pod does
//! not set are not added: kubelet's own injection of them follows `masterservice`.
//!
//! Config (both optional): `{"host": "169.254.2.1", "port": 10268}`.

#[cfg(test)]
mod tests;

use edgegate_filter_sdk::kube::HubAddress;
use edgegate_filter_sdk::{Context, Decision, Filter, IntoFilter, Manifest, Object, Verb};
use edgegate_filter_sdk::{export_filter, host};
use serde_json::{Map, Value};

/// The variable that gives the API's host.
const HOST_VAR: &str = "KUBERNETES_SERVICE_HOST";

/// The variable that gives the API's port.
const PORT_VAR: &str = "KUBERNETES_SERVICE_PORT";

/// The container lists of a pod whose variables are overwritten (YurtHub forgets init
/// containers, though CNI installers run as such).
const CONTAINER_LISTS: [&str; 2] = ["spec.containers", "spec.initContainers"];

/// Rewrites run after the filters that drop or prune, on what is left.
const PRIORITY: i32 = 50;

/// The configured filter.
pub struct ServiceEnvUpdater {
    host: String,
    port: String,
}

impl Filter for ServiceEnvUpdater {
    type Config = HubAddress;

    fn manifest() -> Manifest {
        Manifest::new("serviceenvupdater", env!("CARGO_PKG_VERSION"))
            .matches("", &["pods"], &[Verb::Get, Verb::List, Verb::Watch])
            .components(&["kubelet"])
            .priority(PRIORITY)
            .config_schema(HubAddress::schema())
    }

    fn filter(&self, _ctx: &Context, pod: &mut Object) -> Decision {
        for list in CONTAINER_LISTS {
            // Read first, so a pod whose variables already lead to the hub is forwarded as
            // it came rather than re-encoded.
            let stale = pod.get(list).is_some_and(|containers| {
                vars(containers).any(|var| self.target(var).is_some_and(|to| !holds(var, to)))
            });
            if !stale {
                continue;
            }
            let Some(containers) = pod.get_mut(list) else {
                continue;
            };
            let vars = containers
                .as_array_mut()
                .into_iter()
                .flatten()
                .filter_map(|container| container.get_mut("env")?.as_array_mut())
                .flatten()
                .filter_map(Value::as_object_mut);
            for var in vars {
                if let Some(value) = self.target(var) {
                    var.remove("valueFrom");
                    var.insert("value".into(), value.into());
                }
            }
        }
        if pod.is_edited() {
            host::count("rewritten", 1);
        }
        Decision::Keep
    }
}

impl IntoFilter<ServiceEnvUpdater> for HubAddress {
    fn into_filter(self) -> Result<ServiceEnvUpdater, String> {
        Ok(ServiceEnvUpdater {
            host: self.host(),
            port: self.port.to_string(),
        })
    }
}

impl ServiceEnvUpdater {
    /// The value the variable `var` must hold, if it is one the filter overwrites.
    fn target(&self, var: &Map<String, Value>) -> Option<&str> {
        match var.get("name").and_then(Value::as_str) {
            Some(HOST_VAR) => Some(&self.host),
            Some(PORT_VAR) => Some(&self.port),
            _ => None,
        }
    }
}

/// The variables of the containers in `containers`.
fn vars(containers: &Value) -> impl Iterator<Item = &Map<String, Value>> {
    containers
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|container| container.get("env")?.as_array())
        .flatten()
        .filter_map(Value::as_object)
}

/// Whether a variable holds the literal `value` and nothing else: a `valueFrom` must go,
/// as the API refuses a variable with both and the hub's address must win over any
/// reference.
fn holds(var: &Map<String, Value>, value: &str) -> bool {
    !var.contains_key("valueFrom") && var.get("value").and_then(Value::as_str) == Some(value)
}

export_filter!(ServiceEnvUpdater);
