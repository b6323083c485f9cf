//! One filter instance (a Store of its own, instantiated from the filter's `InstancePre`),
//! and calls into it under the filter's limits: memory cap, epoch deadline, output cap.
//! A call that fails tells why as a [`Failure`]; an instance whose call trapped must not be
//! called again (wasmtime forbids re-entering a trapped component instance).

use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;
use wasmtime::Store;

use super::bindings::{Context, Decision, FilterWorld, FilterWorldPre, Manifest};
use super::engine::Runtime;
use super::host::HostState;
use crate::filter::lookup::Lookup;
use crate::filter::metrics::{CallMetrics, FilterMetrics};
use crate::filter::runtime::lookup_use::{Filtered, LookupsRead};
use crate::filter::runtime::replacement::check_replacement;
use crate::filter::settings::Limits;

/// Why a call into a filter failed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Failure {
    /// The guest trapped (a panic, an unreachable, a bad memory access…).
    #[error("trapped: {0}")]
    Trap(String),
    /// The call ran past its deadline and was interrupted.
    #[error("ran past its deadline of {0:?}")]
    Deadline(Duration),
    /// The guest asked for more memory than its cap and trapped.
    #[error("hit its memory cap of {0} bytes")]
    Memory(usize),
    /// The replacement was larger than the output cap (the instance stays usable).
    #[error("returned {size} bytes, over its output cap of {cap}")]
    Oversized {
        /// Bytes returned.
        size: usize,
        /// The cap.
        cap: usize,
    },
    /// The replacement is not a JSON object, or not the object it replaces (the instance
    /// stays usable).
    #[error("{0}")]
    BadOutput(String),
    /// No instance could be made (instantiation or `configure` failed).
    #[error("could not be instantiated: {0}")]
    Instantiate(String),
    /// `filter-batch` answered a different number of decisions than objects.
    #[error("answered {got} decisions for {sent} objects")]
    BatchLength {
        /// Decisions received.
        got: usize,
        /// Objects sent.
        sent: usize,
    },
}

impl Failure {
    /// The metric label of the failure.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Failure::Trap(_) | Failure::BatchLength { .. } => "trap",
            Failure::Deadline(_) => "deadline",
            Failure::Memory(_) => "memory",
            Failure::Oversized { .. } => "oversized",
            Failure::BadOutput(_) => "bad_output",
            Failure::Instantiate(_) => "instantiate",
        }
    }

    /// Whether the instance must be thrown away.
    pub(crate) fn poisons(&self) -> bool {
        !matches!(self, Failure::Oversized { .. } | Failure::BadOutput(_))
    }
}

/// A live instance of a filter.
pub(crate) struct Instance {
    store: Store<HostState>,
    world: FilterWorld,
    /// The context the instance was last given with `begin`.
    context: Option<Arc<Context>>,
}

/// Makes instances of one filter and calls them under its limits.
pub(crate) struct Instantiator {
    pub(crate) name: Arc<str>,
    pub(crate) limits: Limits,
    pre: FilterWorldPre<HostState>,
    runtime: Arc<Runtime>,
    lookup: Arc<dyn Lookup>,
    pub(crate) metrics: FilterMetrics,
    /// This filter's call and decision series.
    pub(crate) calls: CallMetrics,
    /// What this filter's lookups have read, over all its instances, by object.
    pub(crate) lookups_read: LookupsRead,
}

impl Instantiator {
    /// An instantiator of a prepared component.
    pub(crate) fn new(
        name: Arc<str>,
        limits: Limits,
        pre: FilterWorldPre<HostState>,
        runtime: Arc<Runtime>,
        lookup: Arc<dyn Lookup>,
        metrics: FilterMetrics,
    ) -> Instantiator {
        let calls = metrics.for_filter(&name);
        Instantiator {
            name,
            limits,
            pre,
            runtime,
            lookup,
            calls,
            metrics,
            lookups_read: LookupsRead::default(),
        }
    }

    /// A new, unconfigured instance.
    pub(crate) fn instantiate(&self) -> Result<Instance, Failure> {
        let state = HostState::new(
            Arc::clone(&self.name),
            self.limits.memory,
            Arc::clone(&self.lookup),
            self.metrics.clone(),
        );
        let mut store = Store::new(self.runtime.engine(), state);
        store.limiter(|state| state);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(Runtime::deadline_ticks(self.limits.deadline));
        let _running = self.runtime.enter();
        match self.pre.instantiate(&mut store) {
            Ok(world) => Ok(Instance {
                store,
                world,
                context: None,
            }),
            Err(error) => Err(Failure::Instantiate(format!("{error:#}"))),
        }
    }

    /// A new instance, configured with `config` (JSON text).
    pub(crate) fn configured(&self, config: &str) -> Result<Instance, Failure> {
        let mut instance = self.instantiate()?;
        match self.configure(&mut instance, config)? {
            Ok(()) => Ok(instance),
            Err(message) => Err(Failure::Instantiate(format!("configure: {message}"))),
        }
    }

    /// Reads the manifest.
    pub(crate) fn manifest(&self, instance: &mut Instance) -> Result<Manifest, Failure> {
        let manifest = self.guarded(instance, 1, |world, store| world.call_manifest(store));
        self.record(instance, None);
        manifest
    }

    /// Calls `configure`: the outer error is a failed call, the inner one the filter's
    /// refusal of the config.
    pub(crate) fn configure(
        &self,
        instance: &mut Instance,
        config: &str,
    ) -> Result<Result<(), String>, Failure> {
        let configured = self.guarded(instance, 1, |world, store| {
            world.call_configure(store, config)
        });
        self.record(instance, None);
        configured
    }

    /// Decides about one object.
    pub(crate) fn filter(
        &self,
        instance: &mut Instance,
        ctx: &Arc<Context>,
        object: &[u8],
    ) -> Result<Decision, Failure> {
        let started = Instant::now();
        self.begin(instance, ctx)?;
        let decision = self.guarded(instance, 1, |world, store| world.call_filter(store, object));
        self.calls.call(started.elapsed().as_secs_f64());
        let filtered = Filtered {
            ctx,
            objects: &[object],
            decisions: decision.as_ref().ok().map(std::slice::from_ref),
        };
        self.record(instance, Some(filtered));
        decision
    }

    /// Decides about several objects in one call (the deadline grows with their number).
    /// Each object is copied once, straight into the instance's memory.
    pub(crate) fn filter_batch(
        &self,
        instance: &mut Instance,
        ctx: &Arc<Context>,
        objects: &[&[u8]],
    ) -> Result<Vec<Decision>, Failure> {
        let started = Instant::now();
        let count = u32::try_from(objects.len()).unwrap_or(u32::MAX);
        self.begin(instance, ctx)?;
        let decisions = self.guarded(instance, count, |world, mut store| {
            // The generated call takes owned vectors; the export's type is the same with
            // borrowed slices, which wasmtime lowers from where they lie.
            let batch = world
                .func_filter_batch()
                .func()
                .typed::<(&[&[u8]],), (Vec<Decision>,)>(&store)?;
            let (decisions,) = batch.call(&mut store, (objects,))?;
            Ok(decisions)
        });
        self.calls.call(started.elapsed().as_secs_f64());
        let filtered = Filtered {
            ctx,
            objects,
            decisions: decisions.as_deref().ok(),
        };
        self.record(instance, Some(filtered));
        let decisions = decisions?;
        if decisions.len() != objects.len() {
            return Err(Failure::BatchLength {
                got: decisions.len(),
                sent: objects.len(),
            });
        }
        Ok(decisions)
    }

    /// Gives the instance `ctx` unless it is the context it was last given: a response's
    /// calls, and the next responses of the same kind on a pooled instance, skip it.
    fn begin(&self, instance: &mut Instance, ctx: &Arc<Context>) -> Result<(), Failure> {
        match &instance.context {
            Some(given) if Arc::ptr_eq(given, ctx) => return Ok(()),
            // The same request as the instance's previous response: adopted, not sent again.
            Some(given) if **given == **ctx => {
                instance.context = Some(Arc::clone(ctx));
                return Ok(());
            }
            _ => instance.context = None,
        }
        let begun = self.guarded(instance, 1, |world, store| world.call_begin(store, ctx));
        self.record(instance, None);
        begun?;
        instance.context = Some(Arc::clone(ctx));
        Ok(())
    }

    /// Checks a replacement of `original`: under the output cap, and a JSON object that is
    /// still the same object.
    pub(crate) fn check_output(&self, original: &[u8], decision: &Decision) -> Result<(), Failure> {
        let Decision::Replace(bytes) = decision else {
            return Ok(());
        };
        if bytes.len() > self.limits.max_output {
            return Err(Failure::Oversized {
                size: bytes.len(),
                cap: self.limits.max_output,
            });
        }
        check_replacement(original, bytes).map_err(Failure::BadOutput)
    }

    /// Records what the call just made read: for the objects it filtered, or for every
    /// object when `None` (`configure`, `begin`).
    fn record(&self, instance: &Instance, filtered: Option<Filtered<'_>>) {
        let reads = &instance.store.data().reads;
        self.lookups_read
            .record(filtered, reads, self.lookup.epoch());
    }

    /// Runs one call with the deadline of `units` objects and sorts out how it failed.
    fn guarded<T>(
        &self,
        instance: &mut Instance,
        units: u32,
        call: impl FnOnce(&FilterWorld, &mut Store<HostState>) -> wasmtime::Result<T>,
    ) -> Result<T, Failure> {
        let deadline = self.limits.deadline.saturating_mul(units.max(1));
        instance.store.data_mut().start_call();
        instance
            .store
            .set_epoch_deadline(Runtime::deadline_ticks(deadline));
        let result = {
            let _running = self.runtime.enter();
            call(&instance.world, &mut instance.store)
        };
        result.map_err(|error| {
            if matches!(
                error.downcast_ref::<wasmtime::Trap>(),
                Some(wasmtime::Trap::Interrupt)
            ) {
                Failure::Deadline(deadline)
            } else if instance.store.data().memory_refused {
                Failure::Memory(self.limits.memory)
            } else if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
                // The trap alone: the wasm backtrace around it has no names (filters are
                // stripped) and would swamp the log line.
                Failure::Trap(trap.to_string())
            } else {
                Failure::Trap(format!("{error:#}"))
            }
        })
    }
}
