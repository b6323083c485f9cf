//! Endpoints that follow this node's pods while the cloud is away: an EndpointSlice's
//! endpoint or an Endpoints address whose `targetRef` is a pod the node wrote takes that
//! pod's address and readiness, as kube-controller-manager's endpoint controllers would
//! once they saw the pod. Pods of other nodes are never named by a node's own writes, so
//! their endpoints are never touched.

use serde_json::{Value, json};

use crate::cache::{ResourceKey, Store, StoreError};

/// What a pod's endpoints say of it, from the pod as the node last wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodEndpoint {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// `status.podIP`; `None` while the pod has none (its endpoints keep their address).
    pub ip: Option<String>,
    /// The pod's `Ready` condition is `True` and it is not being deleted.
    pub ready: bool,
    /// The pod's `Ready` condition is `True`.
    pub serving: bool,
    /// The pod is being deleted.
    pub terminating: bool,
}

impl PodEndpoint {
    /// The endpoint `pod` stands for. A pod that has finished (`Succeeded`, `Failed`) or
    /// whose `Ready` condition is not `True` is not ready.
    pub fn of(pod: &Value) -> PodEndpoint {
        let condition_ready = pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let finished = matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        let serving = condition_ready && !finished;
        let terminating = !pod["metadata"]["deletionTimestamp"].is_null();
        PodEndpoint {
            namespace: text(&pod["metadata"]["namespace"]),
            name: text(&pod["metadata"]["name"]),
            ip: pod["status"]["podIP"]
                .as_str()
                .filter(|ip| !ip.is_empty())
                .map(str::to_owned),
            ready: serving && !terminating,
            serving,
            terminating,
        }
    }

    fn is_target(&self, target: &Value) -> bool {
        target["kind"] == "Pod"
            && target["name"].as_str() == Some(self.name.as_str())
            && target["namespace"]
                .as_str()
                .is_none_or(|namespace| namespace == self.namespace)
    }
}

/// The resources whose objects name pods as their endpoints' targets, as `(group, version,
/// resource)`.
pub const FOLLOWING: [(&str, &str, &str); 3] = [
    ("discovery.k8s.io", "v1", "endpointslices"),
    ("discovery.k8s.io", "v1beta1", "endpointslices"),
    ("", "v1", "endpoints"),
];

/// `object` (of `resource`, one of [`FOLLOWING`]) as it is once its endpoints follow `pod`;
/// `None` when none of them names the pod or they already say what the pod says.
pub fn following(resource: &ResourceKey, object: &Value, pod: &PodEndpoint) -> Option<Value> {
    let mut after = object.clone();
    let changed = if resource.resource == "endpoints" {
        endpoints(&mut after, pod)
    } else {
        slice(&mut after, pod)
    };
    changed.then_some(after)
}

/// An EndpointSlice's endpoints naming `pod` take its address and conditions (`ready`
/// always; `serving` and `terminating` where they are given).
fn slice(slice: &mut Value, pod: &PodEndpoint) -> bool {
    let mut changed = false;
    let Some(endpoints) = slice["endpoints"].as_array_mut() else {
        return false;
    };
    for endpoint in endpoints
        .iter_mut()
        .filter(|e| pod.is_target(&e["targetRef"]))
    {
        let before = endpoint.clone();
        if let Some(ip) = &pod.ip {
            endpoint["addresses"] = json!([ip]);
        }
        endpoint["conditions"]["ready"] = pod.ready.into();
        // `serving` and `terminating` only where the cluster's controller writes them (a
        // cluster whose apiserver drops them never shows them).
        let conditions = &mut endpoint["conditions"];
        for (condition, value) in [("serving", pod.serving), ("terminating", pod.terminating)] {
            if !conditions[condition].is_null() {
                conditions[condition] = value.into();
            }
        }
        changed |= *endpoint != before;
    }
    changed
}

/// An Endpoints' addresses naming `pod` take its address, and move to `addresses` when it
/// is ready, to `notReadyAddresses` when it is not.
fn endpoints(endpoints: &mut Value, pod: &PodEndpoint) -> bool {
    let mut changed = false;
    let Some(subsets) = endpoints["subsets"].as_array_mut() else {
        return false;
    };
    for subset in subsets.iter_mut().filter_map(Value::as_object_mut) {
        let before = subset.clone();
        let mut named = Vec::new();
        for list in ["addresses", "notReadyAddresses"] {
            if let Some(Value::Array(addresses)) = subset.get_mut(list) {
                let (ours, others): (Vec<Value>, Vec<Value>) = std::mem::take(addresses)
                    .into_iter()
                    .partition(|a| pod.is_target(&a["targetRef"]));
                *addresses = others;
                named.extend(ours);
            }
        }
        if named.is_empty() {
            continue;
        }
        for address in &mut named {
            if let Some(ip) = &pod.ip {
                address["ip"] = ip.as_str().into();
            }
        }
        let list = if pod.ready {
            "addresses"
        } else {
            "notReadyAddresses"
        };
        let target = subset.entry(list).or_insert_with(|| json!([]));
        if let Value::Array(addresses) = target {
            addresses.extend(named);
        }
        for list in ["addresses", "notReadyAddresses"] {
            if subset
                .get(list)
                .is_some_and(|a| a.as_array().is_some_and(Vec::is_empty))
            {
                subset.remove(list);
            }
        }
        changed |= !same_subset(&before, subset);
    }
    changed
}

/// Whether two subsets hold the same addresses in the same lists, whatever their order.
fn same_subset(a: &serde_json::Map<String, Value>, b: &serde_json::Map<String, Value>) -> bool {
    let sorted = |subset: &serde_json::Map<String, Value>, list: &str| {
        let mut texts: Vec<String> = subset
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(Value::to_string)
            .collect();
        texts.sort();
        texts
    };
    ["addresses", "notReadyAddresses", "ports"]
        .iter()
        .all(|list| sorted(a, list) == sorted(b, list))
}

/// An object that follows a pod: where the cache holds it, and what it becomes.
pub struct Followed {
    /// Its resource, for the component whose copy it is.
    pub resource: ResourceKey,
    /// Its key in the store.
    pub key: String,
    /// The object as it was.
    pub before: Value,
    /// The object once it follows the pod.
    pub after: Value,
}

/// Every component's cached objects in `pod`'s namespace whose endpoints change to follow
/// it (of each of [`FOLLOWING`]).
pub fn followers(store: &dyn Store, pod: &PodEndpoint) -> Result<Vec<Followed>, StoreError> {
    let mut found = Vec::new();
    for (component, _) in store.components()? {
        for (group, version, resource) in FOLLOWING {
            let resource = ResourceKey {
                component: component.clone(),
                resource: resource.to_owned(),
                version: version.to_owned(),
                group: group.to_owned(),
            };
            for entry in store.scan(&resource.namespace_prefix(&pod.namespace))? {
                let (key, bytes) = entry?;
                // What the cache cannot read back as an object is left as it is.
                let Ok(before @ Value::Object(_)) = serde_json::from_slice(&bytes) else {
                    continue;
                };
                if let Some(after) = following(&resource, &before, pod) {
                    found.push(Followed {
                        resource: resource.clone(),
                        key,
                        before,
                        after,
                    });
                }
            }
        }
    }
    Ok(found)
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests;
