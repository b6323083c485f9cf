//! Hostile test filter `bloater`: replaces every object with itself padded to the configured
//! size (8 MiB by default), so that the gateway's output cap must refuse it; or, with
//! `corrupt`, with text that is not JSON (`"json"`) or with another object (`"name"`), so
//! that the gateway's output check must refuse it.

use edgegate_filter_sdk::{
    Context, Decision, Filter, IntoFilter, Manifest, Object, Verb, export_filter,
};
use serde_json::{Value, json};

/// Larger than any default output cap.
const DEFAULT_BYTES: u64 = 8 << 20;

/// What the filter replaces objects with.
enum Output {
    /// The object, with a `pad` field that brings it to this many bytes.
    Padded(usize),
    /// The object's text cut in half.
    Truncated,
    /// The object under another name.
    Renamed,
}

/// The filter.
pub struct Bloater {
    output: Output,
}

impl Filter for Bloater {
    type Config = Value;

    fn manifest() -> Manifest {
        Manifest::new("bloater", "0.1.0")
            .matches("", &["configmaps"], &[Verb::Get, Verb::List, Verb::Watch])
            .components(&["test"])
            .config_schema(json!({
                "type": "object",
                "properties": {
                    "bytes": {"type": "integer", "minimum": 16},
                    "corrupt": {"enum": ["json", "name"]}
                },
                "additionalProperties": false
            }))
    }

    fn filter(&self, _ctx: &Context, object: &mut Object) -> Decision {
        let mut value = object.value().clone();
        match self.output {
            Output::Padded(bytes) => {
                value["pad"] = json!("");
                let unpadded = value.to_string().len();
                value["pad"] = json!("x".repeat(bytes.saturating_sub(unpadded)));
            }
            Output::Truncated => {
                let text = value.to_string().into_bytes();
                return Decision::Replace(text[..text.len() / 2].to_vec());
            }
            Output::Renamed => value["metadata"]["name"] = json!("renamed"),
        }
        Decision::Replace(value.to_string().into_bytes())
    }
}

impl IntoFilter<Bloater> for Value {
    fn into_filter(self) -> Result<Bloater, String> {
        let output = match self.get("corrupt").and_then(Value::as_str) {
            Some("json") => Output::Truncated,
            Some("name") => Output::Renamed,
            _ => {
                let bytes = self
                    .get("bytes")
                    .and_then(Value::as_u64)
                    .unwrap_or(DEFAULT_BYTES);
                Output::Padded(
                    usize::try_from(bytes).map_err(|_| format!("{bytes} bytes is too many"))?,
                )
            }
        };
        Ok(Bloater { output })
    }
}

export_filter!(Bloater);

#[cfg(test)]
mod tests {
    use edgegate_filter_sdk::Resource;
    use edgegate_filter_sdk::testing::Harness;
    use edgegate_filter_sdk::testing::Output;

    use super::*;

    fn replace(config: Value) -> Vec<u8> {
        let harness = Harness::<Bloater>::configure(config).unwrap();
        let ctx = Context::new("test", Verb::Get, Resource::new("", "v1", "configmaps"));
        let object = json!({"metadata": {"name": "cm", "resourceVersion": "3"}});
        let Output::Replace(bytes) = harness.filter(&ctx, &object) else {
            panic!("expected a replacement");
        };
        bytes
    }

    #[test]
    fn replaces_with_itself_padded_to_the_configured_size() {
        let bytes = replace(json!({"bytes": 100}));
        assert_eq!(bytes.len(), 100);
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["metadata"]["name"], "cm");
    }

    #[test]
    fn corrupts_on_request() {
        assert!(serde_json::from_slice::<Value>(&replace(json!({"corrupt": "json"}))).is_err());
        let renamed: Value = serde_json::from_slice(&replace(json!({"corrupt": "name"}))).unwrap();
        assert_eq!(renamed["metadata"]["name"], "renamed");
    }
}
