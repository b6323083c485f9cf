//! Hostile test filter `membomb`: allocates a mebibyte at a time, touching every page, until
//! memory runs out, so that the gateway's per-instance memory cap must stop it.

use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb, export_filter};

/// The filter.
#[derive(serde::Deserialize)]
pub struct MemBomb;

impl Filter for MemBomb {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("membomb", "0.1.0")
            .matches("", &["configmaps"], &[Verb::Get, Verb::List, Verb::Watch])
            .components(&["test"])
    }

    fn filter(&self, _ctx: &Context, _object: &mut Object) -> Decision {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![0xa5; 1 << 20]);
            if std::hint::black_box(&hoard).is_empty() {
                return Decision::Keep;
            }
        }
    }
}

export_filter!(MemBomb);
