//! Checks a filter's config against the JSON Schema its manifest declares, before the
//! config reaches `configure`.

use serde_json::Value;

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
