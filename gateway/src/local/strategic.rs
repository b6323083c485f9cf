//! Kubernetes' strategic merge patch, as kube-apiserver applies it to the kinds the node
//! writes offline (Pods, Nodes): maps merge key by key (`null` removes one), a list with a
//! patch merge key merges element by element on that key, a primitive list of strategy
//! `merge` takes the union, and every other list is replaced. The directives `$patch`
//! (`replace`, `delete`, `merge`), `$retainKeys`, `$setElementOrder/` and
//! `$deleteFromPrimitiveList/` are honoured, as kubelet's patches of pod and node status
//! carry them (`$setElementOrder/conditions`).

use serde_json::{Map, Value};

/// How a list field is patched, from the patch tags of the Go types (`k8s.io/api/core/v1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strategy {
    /// The patch's list replaces the object's.
    Replace,
    /// Elements merge by the value of this key.
    MergeKey(&'static str),
    /// The union of the two lists of primitives.
    MergePrimitives,
}

/// The lists of a Pod or Node that do not replace, by their path of field names from the
/// object's root (list elements add nothing to a path).
const MERGED: &[(&[&str], Strategy)] = &[
    (&["metadata", "ownerReferences"], Strategy::MergeKey("uid")),
    (&["metadata", "finalizers"], Strategy::MergePrimitives),
    (&["spec", "volumes"], Strategy::MergeKey("name")),
    (&["spec", "imagePullSecrets"], Strategy::MergeKey("name")),
    (&["spec", "hostAliases"], Strategy::MergeKey("ip")),
    (
        &["spec", "topologySpreadConstraints"],
        Strategy::MergeKey("topologyKey"),
    ),
    (&["spec", "podCIDRs"], Strategy::MergePrimitives),
    (&["status", "conditions"], Strategy::MergeKey("type")),
    (&["status", "podIPs"], Strategy::MergeKey("ip")),
    (&["status", "addresses"], Strategy::MergeKey("type")),
];

/// The container lists of a pod's spec, and how the lists inside a container merge.
const CONTAINERS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];
const IN_CONTAINER: &[(&str, Strategy)] = &[
    ("ports", Strategy::MergeKey("containerPort")),
    ("env", Strategy::MergeKey("name")),
    ("volumeMounts", Strategy::MergeKey("mountPath")),
    ("volumeDevices", Strategy::MergeKey("devicePath")),
    ("resizePolicy", Strategy::MergeKey("resourceName")),
];

/// Why a strategic merge patch cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum StrategicError {
    /// The patch is not a JSON object.
    #[error("a strategic merge patch must be a JSON object")]
    NotAnObject,
    /// A directive has a value kube-apiserver refuses.
    #[error("invalid strategic merge patch: {0}")]
    Invalid(String),
}

/// Applies `patch` to `object` (a Pod or a Node) as kube-apiserver does.
pub fn apply(object: &mut Value, patch: &Value) -> Result<(), StrategicError> {
    let Value::Object(patch) = patch else {
        return Err(StrategicError::NotAnObject);
    };
    let Value::Object(original) = object else {
        return Err(StrategicError::Invalid("the object is not a map".into()));
    };
    let mut path = Vec::new();
    match merge_map(std::mem::take(original), patch, &mut path)? {
        Some(merged) => *original = merged,
        None => {
            return Err(StrategicError::Invalid(
                "the patch deletes the object".into(),
            ));
        }
    }
    Ok(())
}

/// How the list at `path` is patched.
fn strategy(path: &[&str]) -> Strategy {
    if let Some((_, strategy)) = MERGED.iter().find(|(at, _)| *at == path) {
        return *strategy;
    }
    match path {
        ["spec", list] if CONTAINERS.contains(list) => Strategy::MergeKey("name"),
        ["spec", list, field] if CONTAINERS.contains(list) => IN_CONTAINER
            .iter()
            .find(|(name, _)| name == field)
            .map_or(Strategy::Replace, |(_, strategy)| *strategy),
        _ => Strategy::Replace,
    }
}

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_PRIMITIVES: &str = "$deleteFromPrimitiveList/";

/// Merges `patch` into `original`; `None` when the patch deletes the map.
fn merge_map<'a>(
    mut original: Map<String, Value>,
    patch: &'a Map<String, Value>,
    path: &mut Vec<&'a str>,
) -> Result<Option<Map<String, Value>>, StrategicError> {
    match patch.get(PATCH).map(Value::as_str) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => return Ok(Some(strip(patch, path)?)),
        Some(Some("delete")) => return Ok(None),
        Some(other) => {
            return Err(StrategicError::Invalid(format!(
                "unknown $patch directive {other:?}"
            )));
        }
    }
    let mut orders = Vec::new();
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix(DELETE_PRIMITIVES) {
            let Value::Array(gone) = value else {
                return Err(StrategicError::Invalid(format!("{key} must be a list")));
            };
            if let Some(Value::Array(list)) = original.get_mut(field) {
                list.retain(|item| !gone.contains(item));
            }
        } else if let Some(field) = key.strip_prefix(ELEMENT_ORDER) {
            orders.push((field, value));
        } else if key == RETAIN_KEYS || key == PATCH {
        } else if value.is_null() {
            original.remove(key);
        } else {
            path.push(key);
            let merged = match original.remove(key) {
                Some(current) => merge_value(current, value, path)?,
                None => Some(strip_value(value, path)?),
            };
            path.pop();
            if let Some(merged) = merged {
                original.insert(key.clone(), merged);
            }
        }
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let Value::Array(keep) = retain else {
            return Err(StrategicError::Invalid("$retainKeys must be a list".into()));
        };
        original.retain(|key, _| keep.iter().any(|k| k.as_str() == Some(key)));
    }
    for (field, order) in orders {
        path.push(field);
        let strategy = strategy(path);
        path.pop();
        if let (Some(Value::Array(list)), Value::Array(order)) = (original.get_mut(field), order) {
            reorder(list, order, strategy);
        }
    }
    Ok(Some(original))
}

/// Merges one patch value into the object's; `None` when the patch deletes it.
fn merge_value<'a>(
    current: Value,
    patch: &'a Value,
    path: &mut Vec<&'a str>,
) -> Result<Option<Value>, StrategicError> {
    Ok(match (current, patch) {
        (Value::Object(current), Value::Object(patch)) => {
            merge_map(current, patch, path)?.map(Value::Object)
        }
        (Value::Array(current), Value::Array(patch)) => {
            Some(Value::Array(merge_list(current, patch, path)?))
        }
        (_, patch) => Some(strip_value(patch, path)?),
    })
}

/// Merges a patch's list into the object's, by the list's strategy.
fn merge_list<'a>(
    mut current: Vec<Value>,
    patch: &'a [Value],
    path: &mut Vec<&'a str>,
) -> Result<Vec<Value>, StrategicError> {
    match strategy(path) {
        Strategy::Replace => patch.iter().map(|item| strip_value(item, path)).collect(),
        Strategy::MergePrimitives => {
            for item in patch {
                if !current.contains(item) {
                    current.push(item.clone());
                }
            }
            Ok(current)
        }
        Strategy::MergeKey(key) => {
            let directive =
                |item: &Value| item.get(PATCH).and_then(Value::as_str).map(str::to_owned);
            if patch
                .iter()
                .any(|item| directive(item).as_deref() == Some("replace"))
            {
                return patch
                    .iter()
                    .filter(|item| directive(item).is_none())
                    .map(|item| strip_value(item, path))
                    .collect();
            }
            for item in patch {
                let Some(wanted) = item.get(key) else {
                    return Err(StrategicError::Invalid(format!(
                        "an element of {} lacks its merge key {key:?}",
                        path.join(".")
                    )));
                };
                let at = current.iter().position(|c| c.get(key) == Some(wanted));
                if directive(item).as_deref() == Some("delete") {
                    if let Some(at) = at {
                        current.remove(at);
                    }
                    continue;
                }
                let Value::Object(fields) = item else {
                    return Err(StrategicError::Invalid(format!(
                        "an element of {} is not a map",
                        path.join(".")
                    )));
                };
                match at {
                    Some(at) => {
                        let Value::Object(original) = current.remove(at) else {
                            current.insert(at, strip_value(item, path)?);
                            continue;
                        };
                        if let Some(merged) = merge_map(original, fields, path)? {
                            current.insert(at, Value::Object(merged));
                        }
                    }
                    None => current.push(strip_value(item, path)?),
                }
            }
            Ok(current)
        }
    }
}

/// Orders `list` as `order` lists its elements (by merge key, or by value for primitives);
/// elements it does not name follow in the order they had.
fn reorder(list: &mut Vec<Value>, order: &[Value], strategy: Strategy) {
    let rank = |item: &Value| {
        order.iter().position(|wanted| match strategy {
            Strategy::MergeKey(key) => item.get(key).is_some() && item.get(key) == wanted.get(key),
            _ => item == wanted,
        })
    };
    let mut ranked: Vec<(usize, Value)> = std::mem::take(list)
        .into_iter()
        .enumerate()
        .map(|(at, item)| (rank(&item).unwrap_or(order.len() + at), item))
        .collect();
    ranked.sort_by_key(|(rank, _)| *rank);
    *list = ranked.into_iter().map(|(_, item)| item).collect();
}

/// A patch's value with its directives taken out, for a field the object lacks.
fn strip_value<'a>(value: &'a Value, path: &mut Vec<&'a str>) -> Result<Value, StrategicError> {
    Ok(match value {
        Value::Object(map) => Value::Object(strip(map, path)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|item| item.get(PATCH).is_none())
                .map(|item| strip_value(item, path))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

fn strip<'a>(
    map: &'a Map<String, Value>,
    path: &mut Vec<&'a str>,
) -> Result<Map<String, Value>, StrategicError> {
    let mut out = Map::new();
    for (key, value) in map {
        if key.starts_with('$') || value.is_null() {
            continue;
        }
        path.push(key);
        let stripped = strip_value(value, path);
        path.pop();
        out.insert(key.clone(), stripped?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
