//! Hostile test filter `trapper`: panics (so the call traps) on objects labelled
//! `edgegate.test/trap`, and, with `every = N` in its config, on every Nth object an instance
//! is given; keeps every other object. A fresh instance must serve the next call after a trap.

use std::sync::atomic::{AtomicU32, Ordering};

use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb, export_filter};

/// The label that makes the filter trap.
pub const TRAP_LABEL: &str = "edgegate.test/trap";

/// The filter. Keys of its config other than `every` are ignored, so that it can replace
/// another filter's code under that filter's config.
#[derive(serde::Deserialize)]
pub struct Trapper {
    /// Trap on every `every`th object this instance is given, too.
    #[serde(default)]
    every: Option<u32>,
    /// Objects this instance was given.
    #[serde(skip)]
    seen: AtomicU32,
}

impl Filter for Trapper {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("trapper", "0.1.0")
            .matches("", &["configmaps"], &[Verb::Get, Verb::List, Verb::Watch])
            .components(&["test"])
            .config_schema(serde_json::json!({
                "type": "object",
                "properties": {"every": {"type": "integer", "minimum": 1}}
            }))
    }

    fn filter(&self, _ctx: &Context, object: &mut Object) -> Decision {
        if object.label(TRAP_LABEL).is_some() {
            panic!("asked to trap by {TRAP_LABEL}");
        }
        let seen = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(every) = self.every
            && seen.is_multiple_of(every)
        {
            panic!("object {seen} of this instance: a trap every {every}");
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

    #[test]
    #[should_panic(expected = "object 3 of this instance")]
    fn panics_on_every_nth_object() {
        let harness = Harness::<Trapper>::configure(json!({"every": 3})).unwrap();
        for _ in 0..2 {
            assert_eq!(
                harness.filter(&ctx(), &json!({"metadata": {"name": "a"}})),
                Output::Keep
            );
        }
        harness.filter(&ctx(), &json!({"metadata": {"name": "a"}}));
    }
}
