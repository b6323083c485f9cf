//! The live chain as JSON (`GET /v1/filters`): each filter's name, version, hash, priority,
//! matches, components, policy, limits, status and source (the directory or the cluster),
//! and the last load error.

use serde_json::{Value, json};

use std::collections::{BTreeMap, BTreeSet};

use crate::filter::chain::generation::Generation;
use crate::filter::settings::FilterSettings;

/// The last load that failed.
#[derive(Clone, Debug)]
pub(crate) struct LoadFailure {
    /// The filter it is about, if one.
    pub(crate) filter: Option<String>,
    /// What went wrong.
    pub(crate) message: String,
}

/// Describes `generation`, the filters `disabled` (names → hashes) and the last load
/// `failure` of the filters `settings` name.
pub(crate) fn describe(
    generation: &Generation,
    disabled: &BTreeMap<String, String>,
    failure: Option<&LoadFailure>,
    settings: &FilterSettings,
    in_directory: &BTreeSet<String>,
) -> Value {
    let source = |name: &str| {
        if in_directory.contains(name) {
            "directory"
        } else {
            "cluster"
        }
    };
    let error_for = |name: &str| {
        failure
            .as_ref()
            .filter(|f| f.filter.as_deref() == Some(name))
            .map(|f| f.message.clone())
    };
    let mut filters: Vec<Value> = generation
        .filters()
        .iter()
        .map(|f| {
            json!({
                "name": &*f.name,
                "manifestName": f.manifest.name,
                "version": f.manifest.version,
                "hash": f.hash,
                "priority": f.effective.priority,
                "matches": f.manifest.matches,
                "components": f.effective.components,
                "onError": f.effective.on_error,
                "limits": {
                    "memoryBytes": f.effective.limits.memory,
                    "deadlineMs": f.effective.limits.deadline.as_millis(),
                    "maxOutputBytes": f.effective.limits.max_output,
                },
                "disableAfter": f.effective.disable_after,
                "status": if f.tripwire.tripped() { "turned-off" } else { "active" },
                "source": source(&f.name),
                "lastLoadError": error_for(&f.name),
            })
        })
        .collect();
    filters.extend(disabled.iter().map(|(name, hash)| {
        json!({"name": name, "hash": hash, "status": "disabled", "source": source(name), "lastLoadError": error_for(name)})
    }));
    if let Some(f) = failure {
        // A filter that failed to load and is not in the chain still gets an entry.
        if let Some(name) = &f.filter {
            let listed = filters.iter().any(|v| v["name"] == json!(name));
            if !listed {
                filters.push(json!({"name": name, "status": "failed", "lastLoadError": f.message}));
            }
        }
    }
    json!({
        "generation": generation.number(),
        "directory": settings.dir,
        "configFile": settings.config_file,
        "order": generation.names(),
        "filters": filters,
        "lastLoadError": failure.map(|f| json!({"filter": f.filter, "message": f.message})),
    })
}
