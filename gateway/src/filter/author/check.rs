//! `edgegate filter check`: a component loaded as the gateway would, described.

use std::path::Path;

use serde_json::{Value, json};

use super::harness::load;
use crate::filter::error::FilterError;

/// Loads a component as the gateway would (its compiled code kept in `compiled_cache` if
/// given) and describes it.
pub fn check(
    wasm: &Path,
    options: Option<&Path>,
    compiled_cache: Option<&Path>,
) -> Result<String, FilterError> {
    let filter = load(wasm, options, compiled_cache)?;
    let schema = filter
        .manifest
        .config_schema
        .as_deref()
        .and_then(|s| serde_json::from_str::<Value>(s).ok());
    let described = json!({
        "name": &*filter.name,
        "hash": filter.hash,
        "manifest": {
            "name": filter.manifest.name,
            "version": filter.manifest.version,
            "matches": filter.manifest.matches,
            "components": filter.manifest.components,
            "priority": filter.manifest.priority,
            "configSchema": schema,
        },
        "effective": {
            "priority": filter.effective.priority,
            "components": filter.effective.components,
            "onError": filter.effective.on_error,
            "config": filter.effective.config,
        },
    });
    Ok(pretty(&described))
}

fn pretty(value: &Value) -> String {
    // Serialising a Value cannot fail.
    serde_json::to_string_pretty(value).unwrap_or_default()
}
