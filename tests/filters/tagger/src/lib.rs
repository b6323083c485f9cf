//! Test filter `tagger`: appends its configured tag to the annotation `edgegate.test/trail`
//! (so the order of a chain shows in the output), and drops objects whose label
//! `edgegate.test/drop` names its tag.

use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb, export_filter};
use serde_json::json;

/// The annotation each tagger appends to.
pub const TRAIL: &str = "edgegate.test/trail";
/// The label naming the tagger that drops the object.
pub const DROP_LABEL: &str = "edgegate.test/drop";

/// The filter.
#[derive(serde::Deserialize)]
pub struct Tagger {
    tag: String,
}

impl Filter for Tagger {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("tagger", "0.1.0")
            .matches(
                "",
                &["configmaps", "pods"],
                &[Verb::Get, Verb::List, Verb::Watch],
            )
            .components(&["test"])
            .config_schema(json!({
                "type": "object",
                "properties": {"tag": {"type": "string", "minLength": 1}},
                "required": ["tag"],
                "additionalProperties": false
            }))
    }

    fn filter(&self, _ctx: &Context, object: &mut Object) -> Decision {
        if object.label(DROP_LABEL) == Some(self.tag.as_str()) {
            return Decision::Drop;
        }
        let trail = match object.annotation(TRAIL) {
            Some(trail) => format!("{trail},{}", self.tag),
            None => self.tag.clone(),
        };
        object.set_annotation(TRAIL, &trail);
        Decision::Keep
    }
}

export_filter!(Tagger);

#[cfg(test)]
mod tests {
    use edgegate_filter_sdk::Resource;
    use edgegate_filter_sdk::testing::Harness;
    use edgegate_filter_sdk::testing::Output;

    use super::*;

    #[test]
    fn appends_its_tag_and_drops_what_is_marked_for_it() {
        let harness = Harness::<Tagger>::configure(json!({"tag": "b"})).unwrap();
        let ctx = Context::new("test", Verb::List, Resource::new("", "v1", "configmaps"));
        let tagged = json!({"metadata": {"annotations": {TRAIL: "a"}}});
        let out = harness.filter(&ctx, &tagged).json().unwrap();
        assert_eq!(out["metadata"]["annotations"][TRAIL], "a,b");
        let marked = json!({"metadata": {"labels": {DROP_LABEL: "b"}}});
        assert_eq!(harness.filter(&ctx, &marked), Output::Drop);
        assert!(Harness::<Tagger>::configure(json!({})).is_err());
    }
}
