//! Hostile test filter `trapper`: panics (so the call traps) on objects labelled
//! `edgegate.test/trap`, and keeps every other object: a fresh instance must serve the next
//! call after a trap.

use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb, export_filter};

/// The label that makes the filter trap.
pub const TRAP_LABEL: &str = "edgegate.test/trap";

/// The filter.
#[derive(serde::Deserialize)]
pub struct Trapper;

impl Filter for Trapper {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("trapper", "0.1.0")
            .matches("", &["configmaps"], &[Verb::Get, Verb::List, Verb::Watch])
            .components(&["test"])
    }

    fn filter(&self, _ctx: &Context, object: &mut Object) -> Decision {
        if object.label(TRAP_LABEL).is_some() {
            panic!("asked to trap by {TRAP_LABEL}");
        }
        Decision::Keep
    }
}

export_filter!(Trapper);

#[cfg(test)]
mod tests {
    use edgegate_filter_sdk::Resource;
    use edgegate_filter_sdk::testing::Harness;
    use edgegate_filter_sdk::testing::Output;
    use serde_json::json;

    use super::*;

    fn ctx() -> Context {
        Context::new("test", Verb::List, Resource::new("", "v1", "configmaps"))
    }

    #[test]
    fn keeps_unmarked_objects() {
        let harness = Harness::<Trapper>::configure(json!({})).unwrap();
        assert_eq!(
            harness.filter(&ctx(), &json!({"metadata": {"name": "a"}})),
            Output::Keep
        );
    }

    #[test]
    #[should_panic(expected = "asked to trap")]
    fn panics_on_marked_objects() {
        let harness = Harness::<Trapper>::configure(json!({})).unwrap();
        harness.filter(
            &ctx(),
            &json!({"metadata": {"labels": {TRAP_LABEL: "yes"}}}),
        );
    }
}
