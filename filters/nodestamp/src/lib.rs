//! `nodestamp`: annotates the objects of configured resources with the name (and node pool)
//! of the node the gateway serves them on, so that a client can tell which edge node's view
//! it is looking at. Objects already stamped with the same values are kept as they are.
//!
//! Config (all optional):
//! ```json
//! {"annotation": "edgegate.io/node", "pool-annotation": "edgegate.io/node-pool",
//!  "resources": ["pods", "configmaps"]}
//! ```

use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb, export_filter, host};
use serde::Deserialize;
use serde_json::json;

/// Where the node name goes unless configured otherwise.
const DEFAULT_ANNOTATION: &str = "edgegate.io/node";
/// Where the node pool goes unless configured otherwise.
const DEFAULT_POOL_ANNOTATION: &str = "edgegate.io/node-pool";

/// The filter, as configured.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct NodeStamp {
    #[serde(default = "default_annotation")]
    annotation: String,
    #[serde(default = "default_pool_annotation")]
    pool_annotation: String,
    /// Resources to stamp; every resource the manifest matches when empty.
    #[serde(default)]
    resources: Vec<String>,
}

fn default_annotation() -> String {
    DEFAULT_ANNOTATION.to_owned()
}

fn default_pool_annotation() -> String {
    DEFAULT_POOL_ANNOTATION.to_owned()
}

impl Filter for NodeStamp {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("nodestamp", env!("CARGO_PKG_VERSION"))
            .matches(
                "",
                &["pods", "configmaps", "services"],
                &[Verb::Get, Verb::List, Verb::Watch],
            )
            .matches(
                "apps",
                &["deployments", "daemonsets"],
                &[Verb::Get, Verb::List, Verb::Watch],
            )
            // kubectl only by default: node agents see unannotated objects unless the
            // gateway config adds them.
            .components(&["kubectl"])
            .priority(100)
            .config_schema(json!({
                "type": "object",
                "properties": {
                    "annotation": {"type": "string", "minLength": 1},
                    "pool-annotation": {"type": "string", "minLength": 1},
                    "resources": {"type": "array", "items": {"type": "string"}}
                },
                "additionalProperties": false
            }))
    }

    fn filter(&self, ctx: &Context, object: &mut Object) -> Decision {
        if !self.resources.is_empty() && !self.resources.contains(&ctx.resource) {
            return Decision::Keep;
        }
        let pool = ctx.node_pool.as_deref();
        let stamped = object.annotation(&self.annotation) == Some(ctx.node_name.as_str())
            && object.annotation(&self.pool_annotation) == pool;
        if stamped {
            return Decision::Keep;
        }
        object.set_annotation(&self.annotation, &ctx.node_name);
        match pool {
            Some(pool) => object.set_annotation(&self.pool_annotation, pool),
            None => {
                object.remove_annotation(&self.pool_annotation);
            }
        }
        host::count("stamped", 1);
        Decision::Keep
    }
}

export_filter!(NodeStamp);

#[cfg(test)]
mod tests {
    use edgegate_filter_sdk::Resource;
    use edgegate_filter_sdk::testing::Harness;
    use edgegate_filter_sdk::testing::Output;

    use serde_json::Value;

    use super::*;

    fn ctx(resource: &str) -> Context {
        Context::new("kubectl", Verb::List, Resource::new("", "v1", resource)).node_name("edge-1")
    }

    fn pod(annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "namespace": "default", "resourceVersion": "42",
                            "annotations": annotations}})
    }

    #[test]
    fn stamps_the_node_name_and_keeps_the_rest() {
        let harness = Harness::<NodeStamp>::configure(json!({})).unwrap();
        let out = harness
            .filter(&ctx("pods"), &pod(json!({"a": "b"})))
            .json()
            .unwrap();
        assert_eq!(out["metadata"]["annotations"][DEFAULT_ANNOTATION], "edge-1");
        assert_eq!(out["metadata"]["annotations"]["a"], "b");
        assert_eq!(out["metadata"]["resourceVersion"], "42");
        assert_eq!(
            out["metadata"]["annotations"].get(DEFAULT_POOL_ANNOTATION),
            None
        );
        assert_eq!(harness.counters().get("stamped"), Some(&1));
    }

    #[test]
    fn adds_the_pool_when_the_node_has_one() {
        let harness = Harness::<NodeStamp>::configure(json!({})).unwrap();
        let ctx = ctx("pods").node_pool("hangzhou");
        let out = harness.filter(&ctx, &pod(json!({}))).json().unwrap();
        assert_eq!(
            out["metadata"]["annotations"][DEFAULT_POOL_ANNOTATION],
            "hangzhou"
        );
    }

    #[test]
    fn already_stamped_objects_are_kept_without_re_encoding() {
        let harness = Harness::<NodeStamp>::configure(json!({})).unwrap();
        let stamped = pod(json!({DEFAULT_ANNOTATION: "edge-1"}));
        assert_eq!(harness.filter(&ctx("pods"), &stamped), Output::Keep);
        let other_node = pod(json!({DEFAULT_ANNOTATION: "edge-2"}));
        assert!(matches!(
            harness.filter(&ctx("pods"), &other_node),
            Output::Replace(_)
        ));
        assert_eq!(harness.counters().get("stamped"), Some(&1));
    }

    #[test]
    fn config_names_the_annotation_and_the_resources() {
        let config = json!({"annotation": "example.com/seen-by", "resources": ["configmaps"]});
        let harness = Harness::<NodeStamp>::configure(config).unwrap();
        assert_eq!(harness.filter(&ctx("pods"), &pod(json!({}))), Output::Keep);
        let out = harness
            .filter(&ctx("configmaps"), &pod(json!({})))
            .json()
            .unwrap();
        assert_eq!(
            out["metadata"]["annotations"]["example.com/seen-by"],
            "edge-1"
        );
    }

    #[test]
    fn batches_decide_per_object() {
        let harness = Harness::<NodeStamp>::configure(json!({})).unwrap();
        let outs = harness.filter_batch(
            &ctx("pods"),
            &[pod(json!({DEFAULT_ANNOTATION: "edge-1"})), pod(json!({}))],
        );
        assert_eq!(outs[0], Output::Keep);
        assert!(outs[1].json().is_some());
    }

    #[test]
    fn manifest_declares_its_matches_and_schema() {
        let manifest = NodeStamp::manifest();
        assert_eq!(manifest.name, "nodestamp");
        assert_eq!(manifest.components, ["kubectl"]);
        let schema: Value =
            serde_json::from_str(manifest.config_schema.as_deref().unwrap()).unwrap();
        assert_eq!(schema["additionalProperties"], false);
    }
}
