//! Hostile test filter `looper`: spins forever on every object, so that the gateway's
//! per-call deadline (epoch interruption) must stop it.

use edgegate_filter_sdk::{Context, Decision, Filter, Manifest, Object, Verb, export_filter};

/// The filter.
#[derive(serde::Deserialize)]
pub struct Looper;

impl Filter for Looper {
    type Config = Self;

    fn manifest() -> Manifest {
        Manifest::new("looper", "0.1.0")
            .matches("", &["configmaps"], &[Verb::Get, Verb::List, Verb::Watch])
            .components(&["test"])
    }

    fn filter(&self, _ctx: &Context, object: &mut Object) -> Decision {
        spin(object)
    }
}

/// Never returns (natively too, so it has no native test).
fn spin(object: &Object) -> Decision {
    let mut turns = 0u64;
    loop {
        // Opaque to the optimiser, so the loop is not folded away.
        turns = std::hint::black_box(turns.wrapping_add(object.name().map_or(1, str::len) as u64));
        if std::hint::black_box(turns) == u64::MAX {
            return Decision::Keep;
        }
    }
}

export_filter!(Looper);
