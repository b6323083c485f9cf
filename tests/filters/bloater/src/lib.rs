//! Hostile test filter `bloater`: replaces every object with a JSON object padded to the
//! configured size (8 MiB by default), so that the gateway's output cap must refuse it.

use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb, export_filter};
use serde_json::{Value, json};

/// Larger than any default output cap.
const DEFAULT_BYTES: u64 = 8 << 20;

/// The filter.
pub struct Bloater {
    bytes: usize,
}

impl Filter for Bloater {
    fn manifest() -> Manifest {
        Manifest::new("bloater", "0.1.0")
            .matches("", &["configmaps"], &[Verb::Get, Verb::List, Verb::Watch])
            .components(&["test"])
            .config_schema(json!({
                "type": "object",
                "properties": {"bytes": {"type": "integer", "minimum": 16}},
                "additionalProperties": false
            }))
    }

    fn configure(config: Value) -> Result<Self, String> {
        let bytes = config
            .get("bytes")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_BYTES);
        let bytes = usize::try_from(bytes).map_err(|_| format!("{bytes} bytes is too many"))?;
        Ok(Bloater { bytes })
    }

    fn filter(&self, _ctx: &Context, _object: &mut Object) -> Decision {
        let padding = "x".repeat(self.bytes.saturating_sub(10));
        Decision::Replace(format!("{{\"pad\":\"{padding}\"}}").into_bytes())
    }
}

export_filter!(Bloater);

#[cfg(test)]
mod tests {
    use edgegate_filter_sdk::Output;
    use edgegate_filter_sdk::testing::Harness;

    use super::*;

    #[test]
    fn replaces_with_exactly_the_configured_size() {
        let harness = Harness::<Bloater>::configure(json!({"bytes": 100})).unwrap();
        let ctx = Context::new("test", Verb::Get, "", "v1", "configmaps");
        let Output::Replace(bytes) = harness.filter(&ctx, &json!({})) else {
            panic!("expected a replacement");
        };
        assert_eq!(bytes.len(), 100);
        assert!(serde_json::from_slice::<Value>(&bytes).is_ok());
    }
}
