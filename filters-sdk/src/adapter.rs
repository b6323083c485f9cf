//! Runs a [`Filter`] behind the world's exports: holds the configured filter, parses each
//! object once and turns decisions into what the host receives. The wasm exports and the
//! native test harness both go through here, so tests exercise the same path.

use std::cell::RefCell;

use serde::de::DeserializeOwned;

use crate::filter::{Filter, IntoFilter};
use crate::host;
use crate::object::Object;
use crate::types::{Context, Decision, Level, Manifest};

/// The configured filter of one instance (`None` until `configure` succeeds), and the
/// context the host last began.
pub struct Slot<F> {
    filter: RefCell<Option<F>>,
    context: RefCell<Option<Context>>,
}

impl<F: Filter> Default for Slot<F> {
    fn default() -> Self {
        Slot::new()
    }
}

impl<F: Filter> Slot<F> {
    /// An unconfigured slot.
    pub const fn new() -> Slot<F> {
        Slot {
            filter: RefCell::new(None),
            context: RefCell::new(None),
        }
    }

    /// The filter's manifest.
    pub fn manifest(&self) -> Manifest {
        F::manifest()
    }

    /// Parses the config and builds the filter.
    pub fn configure(&self, config: &str) -> Result<(), String> {
        let config = if config.trim().is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            serde_json::from_str(config).map_err(|e| format!("config is not JSON: {e}"))?
        };
        let filter = read_config::<F::Config>(config)?.into_filter()?;
        *self.filter.borrow_mut() = Some(filter);
        Ok(())
    }

    /// Sets the context of the calls that follow (the `begin` export).
    pub fn begin(&self, ctx: Context) {
        *self.context.borrow_mut() = Some(ctx);
    }

    /// Runs `call` with the context last begun.
    pub fn in_context<T>(&self, call: impl FnOnce(&Context) -> T) -> T {
        let context = self.context.borrow();
        match context.as_ref() {
            Some(ctx) => call(ctx),
            None => fail("filter called before begin"),
        }
    }

    /// Decides about one object.
    pub fn filter(&self, ctx: &Context, bytes: Vec<u8>) -> Output {
        let mut objects = [parse(bytes)];
        let decision = self.with_filter(|filter| filter.filter(ctx, &mut objects[0]));
        let [object] = objects;
        output(decision, &object)
    }

    /// Decides about several objects; one output per object, in order.
    pub fn filter_batch(&self, ctx: &Context, objects: Vec<Vec<u8>>) -> Vec<Output> {
        let mut parsed: Vec<Object> = objects.into_iter().map(parse).collect();
        let decisions = self.with_filter(|filter| filter.filter_batch(ctx, &mut parsed));
        if decisions.len() != parsed.len() {
            fail(&format!(
                "filter_batch returned {} decisions for {} objects",
                decisions.len(),
                parsed.len()
            ));
        }
        decisions
            .into_iter()
            .zip(&parsed)
            .map(|(decision, object)| output(decision, object))
            .collect()
    }

    fn with_filter<T>(&self, run: impl FnOnce(&F) -> T) -> T {
        let slot = self.filter.borrow();
        match slot.as_ref() {
            Some(filter) => run(filter),
            None => fail("filter called before configure"),
        }
    }
}

/// The config as the filter's type. A type that reads from `null` (`()`, a unit struct)
/// takes no config, so whatever config it is given reads as `null`: as before configs were
/// typed, it is the manifest's schema ([`crate::types::Manifest::no_config`]) that refuses keys.
fn read_config<C: DeserializeOwned>(config: serde_json::Value) -> Result<C, String> {
    serde_json::from_value(config)
        .or_else(|error| serde_json::from_value(serde_json::Value::Null).map_err(|_| error))
        .map_err(|error| format!("bad config: {error}"))
}

fn parse(bytes: Vec<u8>) -> Object {
    match Object::from_vec(bytes) {
        Ok(object) => object,
        Err(error) => fail(&format!("the object is not a Kubernetes object: {error}")),
    }
}

fn output(decision: Decision, object: &Object) -> Output {
    match decision {
        // The object knows whether it was edited, so returning `Keep` after an edit cannot
        // throw the edit away; an edit that changed nothing still forwards the original.
        Decision::Keep => match object.edits() {
            Some(bytes) => Output::Replace(bytes),
            None => Output::Keep,
        },
        Decision::Drop => Output::Drop,
        Decision::Replace(bytes) => Output::Replace(bytes),
    }
}

/// A decision as the gateway receives it (and a test reads it: [`crate::testing::Output`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// The original bytes are forwarded.
    Keep,
    /// The object is left out.
    Drop,
    /// These bytes are forwarded instead.
    Replace(Vec<u8>),
}

impl Output {
    /// The replacement parsed as JSON, if this is a replacement of valid JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        match self {
            Output::Replace(bytes) => serde_json::from_slice(bytes).ok(),
            Output::Keep | Output::Drop => None,
        }
    }
}

/// Something only a host bug or a broken filter causes: say why in the gateway's log, then
/// trap, so that the host applies the filter's failure policy.
fn fail(message: &str) -> ! {
    host::log(Level::Error, message);
    panic!("{message}");
}
