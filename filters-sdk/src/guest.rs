//! The guest side of the `edgegate:filter` world (wasm builds only): conversions between the
//! generated bindings and the SDK's types, and the functions the `export_filter!` expansion
//! calls.

use crate::adapter::{Output, Slot};
use crate::filter::Filter;
use crate::types::{Context, Level, Manifest};

pub use wit_bindgen;

use crate::bindings::edgegate::filter::types as wit;
use crate::host::wasm as imports;

pub use crate::bindings::Guest;

crate::__wit_verb_conversions!(wit::Verb);

fn context_from_wit(ctx: wit::Context) -> Context {
    Context {
        component: ctx.component,
        verb: ctx.verb.into(),
        group: ctx.group,
        version: ctx.version,
        resource: ctx.resource,
        namespace: ctx.namespace,
        node_name: ctx.node_name,
        node_pool: ctx.node_pool,
    }
}

fn output_to_wit(output: Output) -> wit::Decision {
    match output {
        Output::Keep => wit::Decision::Keep,
        Output::Drop => wit::Decision::Drop,
        Output::Replace(bytes) => wit::Decision::Replace(bytes),
    }
}

/// The `manifest` export.
pub fn manifest<F: Filter>() -> wit::Manifest {
    let manifest: Manifest = F::manifest();
    wit::Manifest {
        name: manifest.name,
        version: manifest.version,
        matches: manifest
            .matches
            .into_iter()
            .map(|m| wit::ResourceMatch {
                group: m.group,
                resources: m.resources,
                verbs: m.verbs.into_iter().map(wit::Verb::from).collect(),
            })
            .collect(),
        components: manifest.components,
        priority: manifest.priority,
        config_schema: manifest.config_schema,
    }
}

/// The `configure` export. Also routes panic messages to the gateway's log: a panic traps
/// the call, and without this its message would go to a stderr that leads nowhere.
pub fn configure<F: Filter>(slot: &Slot<F>, config: String) -> Result<(), String> {
    std::panic::set_hook(Box::new(|info| {
        imports::log(Level::Error, &format!("panic: {info}"));
    }));
    slot.configure(&config)
}

/// The `begin` export.
pub fn begin<F: Filter>(slot: &Slot<F>, ctx: wit::Context) {
    slot.begin(context_from_wit(ctx));
}

/// The `filter` export.
pub fn filter<F: Filter>(slot: &Slot<F>, object: Vec<u8>) -> wit::Decision {
    output_to_wit(slot.in_context(|ctx| slot.filter(ctx, object)))
}

/// The `filter-batch` export.
pub fn filter_batch<F: Filter>(slot: &Slot<F>, objects: Vec<Vec<u8>>) -> Vec<wit::Decision> {
    slot.in_context(|ctx| slot.filter_batch(ctx, objects))
        .into_iter()
        .map(output_to_wit)
        .collect()
}
