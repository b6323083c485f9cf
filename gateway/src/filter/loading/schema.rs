//! Checks a filter's config against the JSON Schema its manifest declares, before the
//! config reaches `configure`: in a child process when the gateway has one (see
//! [`super::helper_process`]), remembering the pairs that passed so that a reload does not check an
//! unchanged filter again.

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::filter::error::FilterError;
use crate::filter::metrics::FilterMetrics;
use crate::filter::metrics::Place;
use crate::filter::runtime::helper_process::{CheckedConfig, ConfigCheck, HelperProcess};

/// Schema and config pairs remembered as passed; beyond this the memory starts afresh.
const MAX_REMEMBERED: usize = 1024;

/// The gateway's config checks.
#[derive(Debug)]
pub(crate) struct SchemaChecks {
    child: Option<HelperProcess>,
    passed: Mutex<HashSet<[u8; 32]>>,
}

impl SchemaChecks {
    /// Checks run by `child` when given, else in this process.
    pub(crate) fn new(child: Option<HelperProcess>) -> SchemaChecks {
        SchemaChecks {
            child,
            passed: Mutex::new(HashSet::new()),
        }
    }

    /// [`check`], done where it leaves no memory behind, and counted by place.
    pub(crate) fn check(
        &self,
        schema: Option<&str>,
        config: &Value,
        metrics: &FilterMetrics,
    ) -> Result<(), String> {
        let Some(schema) = schema else {
            return Ok(());
        };
        let key: [u8; 32] = Sha256::new()
            .chain_update(schema)
            .chain_update([0])
            .chain_update(config.to_string())
            .finalize()
            .into();
        let mut passed = self.passed.lock().unwrap_or_else(|p| p.into_inner());
        if passed.contains(&key) {
            return Ok(());
        }
        let in_child = self.child.as_ref().and_then(|child| {
            child
                .check_config(schema, config)
                .inspect_err(|reason| {
                    tracing::debug!(%reason, "checking a filter config in the gateway's process");
                })
                .ok()
        });
        let (verdict, place) = match in_child {
            Some(verdict) => (verdict, Place::Child),
            None => (check(Some(schema), config), Place::Gateway),
        };
        metrics.config_checked(place);
        if verdict.is_ok() {
            if passed.len() >= MAX_REMEMBERED {
                passed.clear();
            }
            passed.insert(key);
        }
        verdict
    }
}

/// Why a config is refused: the schema itself is broken, or the config breaks it. Each
/// message names the offending place (`/bytes: "lots" is not of type "integer"`).
pub(crate) fn check(schema: Option<&str>, config: &Value) -> Result<(), String> {
    let Some(schema) = schema else {
        return Ok(());
    };
    let schema: Value =
        serde_json::from_str(schema).map_err(|e| format!("its config schema is not JSON: {e}"))?;
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| format!("its config schema is not a valid JSON Schema: {e}"))?;
    let problems: Vec<String> = validator
        .iter_errors(config)
        .map(|error| {
            let at = error.instance_path().as_str();
            let at = if at.is_empty() { "/" } else { at };
            format!("{at}: {error}")
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "config does not match the schema: {}",
            problems.join("; ")
        ))
    }
}

/// `edgegate filter check-config`: the verdict (JSON) on the check `input` asks for.
pub fn check_config(input: &[u8]) -> Result<String, FilterError> {
    let asked: ConfigCheck = serde_json::from_slice(input)
        .map_err(|e| FilterError::Input(format!("not a config check: {e}")))?;
    let verdict = CheckedConfig {
        refused: check(Some(&asked.schema), &asked.config).err(),
    };
    serde_json::to_string(&verdict)
        .map_err(|e| FilterError::Input(format!("cannot encode the verdict: {e}")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SCHEMA: &str = r#"{"type": "object", "properties": {"bytes": {"type": "integer"}},
                             "additionalProperties": false}"#;

    #[test]
    fn valid_configs_pass_and_invalid_ones_say_where() {
        assert!(check(Some(SCHEMA), &json!({"bytes": 3})).is_ok());
        assert!(check(None, &json!({"anything": true})).is_ok());
        let error = check(Some(SCHEMA), &json!({"bytes": "lots"})).unwrap_err();
        assert!(
            error.contains("/bytes") && error.contains("integer"),
            "{error}"
        );
        let error = check(Some(SCHEMA), &json!({"other": 1})).unwrap_err();
        assert!(error.contains("other"), "{error}");
    }

    #[test]
    fn broken_schemas_are_reported() {
        assert!(
            check(Some("{"), &json!({}))
                .unwrap_err()
                .contains("not JSON")
        );
        let error = check(Some(r#"{"type": 12}"#), &json!({})).unwrap_err();
        assert!(error.contains("not a valid JSON Schema"), "{error}");
    }
}
