//! The one wasmtime [`Engine`] of the gateway and its linker: compiling a component (from the
//! compiled-code store, by the helper process, or here) and linking it. Calls are bounded by
//! epoch deadlines, whose ticker is in [`super::epoch`].
//!
//! With [`PERF_MAP_ENV`] set, the engine writes a perf map (`/tmp/perf-PID.map`) of every
//! compiled or loaded filter's code, so that `perf report` names guest functions; with
//! [`ON_DEMAND_ENV`] set, instances are not pooled, so the gateway runs under valgrind.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, ProfilingStrategy,
};

use super::bindings::{FilterWorld, FilterWorldPre, WORLD_VERSION, imported_world_version, runs};
use super::code_store::CompiledStore;
use super::epoch::{CallGuard, EPOCH_TICK, Ticker};
use super::function_cache::FunctionCache;
use super::host::{HostState, WASI_INTERFACES, WASI_POLL, add_wasi_to_linker, define_pollable};
use super::seal::{Seal, Untrusted};
use super::trapping_imports::{self, Provided};
use crate::filter::error::FilterError;
use crate::filter::metrics::Place;
use crate::filter::runtime::code_store::sha256;
use crate::filter::runtime::helper_process::HelperProcess;

/// The environment variable that, set to anything but empty or `0`, has the engine write a
/// perf map of filters' code (`/tmp/perf-PID.map`) for `perf` to name guest functions by:
/// by their names when the component keeps its name section, else `wasm[N]::function[M]`.
pub const PERF_MAP_ENV: &str = "EDGEGATE_FILTER_PERF_MAP";

/// The environment variable that, set to anything but empty or `0`, has the engine allocate
/// each filter instance's memory when it is made instead of from the pool: the pool reserves
/// terabytes of address space up front, which tools that run the gateway under their own
/// memory manager (valgrind) cannot reserve.
pub const ON_DEMAND_ENV: &str = "EDGEGATE_FILTER_ON_DEMAND";

/// The largest linear memory any filter may be given; per-filter caps (`StoreLimits`) are
/// at most this. The pooling allocator reserves (but does not commit) this much address
/// space per pooled memory.
pub(crate) const MAX_MEMORY_BYTES: usize = 1 << 30;

/// Component instances that may exist at once across all filters (pooled idle ones and
/// those checked out by responses). A filter instance is a few core instances; beyond this
/// instantiation fails and the filter's failure policy applies.
const MAX_INSTANCES: u32 = 512;

/// The engine, the linker every filter is instantiated with, and the epoch ticker.
pub(crate) struct Runtime {
    engine: Engine,
    linker: Linker<HostState>,
    /// The interfaces `linker` defines: a component's other imports get stand-ins.
    provided: Provided,
    ticker: Ticker,
    /// Components compiled so far (those found in the store included), to show reuse.
    compiles: AtomicU64,
    /// Where compiled code is kept and mapped from, when set.
    compiled: Option<CompiledStore>,
    /// The functions compiled for the stored components, which compiles take code from.
    functions: Option<Arc<FunctionCache>>,
    /// Compiles new components in a child process first, when set (with a store).
    child: Option<HelperProcess>,
}

impl Runtime {
    /// Builds the engine; compiled code is kept in a store in `compiled_cache_dir` if given,
    /// and then compiled by `child` first when one is given.
    pub(crate) fn new(
        compiled_cache_dir: Option<&Path>,
        child: Option<HelperProcess>,
    ) -> Result<Arc<Runtime>, FilterError> {
        Runtime::new_counted(compiled_cache_dir, child, Counter::default())
    }

    /// [`Runtime::new`], counting in `rejects` the stored files refused because their seal
    /// did not verify. A store in a directory that is not the gateway's alone is refused
    /// ([`FilterError::UntrustedStore`]).
    pub(crate) fn new_counted(
        compiled_cache_dir: Option<&Path>,
        child: Option<HelperProcess>,
        rejects: Counter,
    ) -> Result<Arc<Runtime>, FilterError> {
        let engine_error = |error: wasmtime::Error| FilterError::Engine(format!("{error:#}"));
        let mut config = Config::new();
        config.epoch_interruption(true);
        if asked(PERF_MAP_ENV) {
            config.profiler(ProfilingStrategy::PerfMap);
        }
        let mut pooling = PoolingAllocationConfig::new();
        pooling
            .total_component_instances(MAX_INSTANCES)
            .total_core_instances(MAX_INSTANCES * 4)
            .total_memories(MAX_INSTANCES * 2)
            .total_tables(MAX_INSTANCES * 4)
            .max_memory_size(MAX_MEMORY_BYTES);
        let on_demand = asked(ON_DEMAND_ENV);
        config.allocation_strategy(match on_demand {
            true => InstanceAllocationStrategy::OnDemand,
            false => InstanceAllocationStrategy::Pooling(pooling),
        });
        let cache_error = |dir: &Path| {
            let path = dir.to_owned();
            move |source| FilterError::CompiledCache { path, source }
        };
        let compiled_cache_dir = compiled_cache_dir
            .map(|dir| std::path::absolute(dir).map_err(cache_error(dir)))
            .transpose()?;
        let sealed = match compiled_cache_dir.as_deref() {
            Some(dir) => Some((
                dir,
                Arc::new(Seal::open(dir).map_err(|reason| match reason {
                    Untrusted::Io(source) => cache_error(dir)(source),
                    reason => FilterError::UntrustedStore {
                        path: dir.to_owned(),
                        reason: reason.to_string(),
                    },
                })?),
            )),
            None => None,
        };
        let functions = sealed
            .as_ref()
            .map(|(dir, seal)| Arc::new(FunctionCache::new(dir, seal.clone(), rejects.clone())));
        if let Some(functions) = &functions {
            config
                .enable_incremental_compilation(functions.clone())
                .map_err(engine_error)?;
        }
        // The pool's reservation is what fails under an address-space limit: the error
        // names the switch that does without it.
        let engine = Engine::new(&config).map_err(|error| match on_demand {
            true => engine_error(error),
            false => FilterError::Engine(format!(
                "{error:#} (the instance pool reserves terabytes of address space; \
                 under a limit such as `ulimit -v` or systemd's LimitAS=, \
                 {ON_DEMAND_ENV}=1 makes each instance's memory on demand)"
            )),
        })?;
        let compiled = sealed
            .map(|(dir, seal)| {
                CompiledStore::open(dir, &engine, seal, rejects).map_err(cache_error(dir))
            })
            .transpose()?;
        let mut linker = Linker::new(&engine);
        add_wasi_to_linker(&mut linker).map_err(engine_error)?;
        FilterWorld::add_to_linker::<HostState, wasmtime::component::HasSelf<HostState>>(
            &mut linker,
            |state| state,
        )
        .map_err(engine_error)?;
        let host = format!("edgegate:filter/host@{WORLD_VERSION}");
        let provided = Provided::new(WASI_INTERFACES.into_iter().chain([host.as_str()])).resource(
            WASI_POLL,
            "pollable",
            define_pollable,
        );
        let ticker =
            Ticker::start(engine.clone()).map_err(|e| FilterError::Engine(e.to_string()))?;
        Ok(Arc::new(Runtime {
            engine,
            linker,
            provided,
            ticker,
            compiles: AtomicU64::new(0),
            child: child.filter(|_| compiled.is_some()),
            compiled,
            functions,
        }))
    }

    /// The engine.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The component `wasm` compiled: mapped from the store when it holds the code, else
    /// compiled (by the child when there is one) into the store and mapped from there; where
    /// it was compiled, `None` when the store had it.
    pub(crate) fn compile(
        &self,
        name: &str,
        wasm: &[u8],
    ) -> Result<(Component, Option<Place>), FilterError> {
        self.compiles.fetch_add(1, Ordering::Relaxed);
        let compile_error = |error: wasmtime::Error| FilterError::Compile {
            name: name.to_owned(),
            message: format!("{error:#}"),
        };
        let Some(store) = &self.compiled else {
            let component = Component::new(&self.engine, wasm).map_err(compile_error)?;
            return Ok((component, Some(Place::Gateway)));
        };
        let digest = sha256(wasm);
        if let Some(component) = store.load(&self.engine, &digest) {
            return Ok((component, None));
        }
        if let Some(child) = &self.child {
            match child.compile(wasm) {
                Ok(()) => {
                    if let Some(component) = store.load(&self.engine, &digest) {
                        return Ok((component, Some(Place::Child)));
                    }
                }
                Err(reason) => {
                    tracing::debug!(filter = name, %reason, "compiling in the gateway's process");
                }
            }
        }
        let code = self
            .engine
            .precompile_component(wasm)
            .map_err(compile_error)?;
        match store.store(&digest, &code) {
            Ok(_) => {
                if let Some(functions) = &self.functions
                    && let Err(error) = functions.store(&digest)
                {
                    tracing::debug!(filter = name, %error, "cannot store compiled functions");
                }
                if let Some(component) = store.load(&self.engine, &digest) {
                    return Ok((component, Some(Place::Gateway)));
                }
            }
            Err(error) => {
                tracing::warn!(filter = name, dir = %store.dir().display(), %error, "cannot store compiled code; keeping it in memory");
            }
        }
        // SAFETY: `code` is what this engine compiled just now.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize(&self.engine, &code) };
        let component = component.map_err(compile_error)?;
        Ok((component, Some(Place::Gateway)))
    }

    /// Deletes stored code no filter in `live` (digests of components) uses, but for the
    /// [`UNUSED_KEPT`](super::code_store::UNUSED_KEPT) most recently used.
    pub(crate) fn prune<'a>(&self, live: impl IntoIterator<Item = &'a str>) {
        let Some(store) = &self.compiled else {
            return;
        };
        match store.prune(live, super::code_store::UNUSED_KEPT) {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "deleted compiled code no filter used"),
            Err(error) => {
                tracing::warn!(dir = %store.dir().display(), %error, "cannot prune compiled code")
            }
        }
    }

    /// Links a compiled component: imports the gateway does not provide (filesystem, sockets,
    /// stdio) are linked as functions that trap.
    pub(crate) fn prepare(
        &self,
        name: &str,
        component: &Component,
    ) -> Result<FilterWorldPre<HostState>, FilterError> {
        let link_error = |error: wasmtime::Error| FilterError::Link {
            name: name.to_owned(),
            message: format!("{error:#}"),
        };
        if let Some(built) = imported_world_version(&self.engine, component)
            && !runs(&built)
        {
            return Err(FilterError::Version {
                name: name.to_owned(),
                built,
                runs: WORLD_VERSION,
            });
        }
        let pre = self.link(component).map_err(link_error)?;
        FilterWorldPre::new(pre).map_err(link_error)
    }

    /// Links `component`'s imports, those the linker lacks as stand-ins that trap.
    fn link(&self, component: &Component) -> wasmtime::Result<InstancePre<HostState>> {
        let mut linker = self.linker.clone();
        trapping_imports::define(&mut linker, component, &self.provided)?;
        linker.instantiate_pre(component)
    }

    /// The functions compiled for the stored components, when there is a store.
    #[cfg(test)]
    pub(crate) fn functions(&self) -> Option<&FunctionCache> {
        self.functions.as_deref()
    }

    /// How many components this runtime was asked to compile.
    #[cfg(test)]
    pub(crate) fn compiles(&self) -> u64 {
        self.compiles.load(Ordering::Relaxed)
    }

    /// Marks a call as running for as long as the guard lives, so the epoch ticks.
    pub(crate) fn enter(&self) -> CallGuard<'_> {
        self.ticker.enter()
    }

    /// Epoch ticks that make up `deadline` (at least one whole tick beyond it, since the
    /// next tick may come at once).
    pub(crate) fn deadline_ticks(deadline: Duration) -> u64 {
        let tick = EPOCH_TICK.as_micros().max(1);
        u64::try_from(deadline.as_micros().div_ceil(tick)).unwrap_or(u64::MAX / 2) + 1
    }
}

/// Whether the environment variable `name` ([`PERF_MAP_ENV`], [`ON_DEMAND_ENV`]) is set to
/// ask for what it names.
fn asked(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|value| !value.is_empty() && value != "0")
}

/// `edgegate filter compile`: compiles `wasm` into the compiled-code store in
/// `compiled_cache_dir`, where a gateway using that store finds it.
pub fn compile_into_cache(
    name: &str,
    wasm: &[u8],
    compiled_cache_dir: &Path,
) -> Result<(), FilterError> {
    let runtime = Runtime::new(Some(compiled_cache_dir), None)?;
    runtime.compile(name, wasm).map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Runtime;
    use crate::filter::metrics::FilterMetrics;
    use crate::filter::runtime::host::HostState;
    use crate::filter::{FilterError, NoLookup};

    #[test]
    fn a_relative_compiled_cache_dir_is_accepted() {
        // `--disk-cache-path` may be relative; the compiled-code store lives under it.
        let scratch = tempfile::tempdir_in(".").expect("a scratch dir beside the crate");
        let name = scratch.path().file_name().expect("a dir name");
        let relative = std::path::Path::new(name).join("_compiled-filters");
        assert!(relative.is_relative());
        Runtime::new(Some(&relative), None).expect("the runtime builds");
        assert!(scratch.path().join("_compiled-filters").is_dir());
    }

    /// A component importing the world's `count` at `version`, exporting `run`, which counts
    /// 5 under the name `old`.
    fn counting_component(version: &str) -> Vec<u8> {
        wat::parse_str(format!(
            r#"(component
                (import "edgegate:filter/host@{version}" (instance $host
                    (export "count" (func (param "name" string) (param "delta" u64)))))
                (core module $memory (memory (export "memory") 1) (data (i32.const 0) "old"))
                (core instance $memory (instantiate $memory))
                (alias core export $memory "memory" (core memory $mem))
                (alias export $host "count" (func $count))
                (core func $count (canon lower (func $count) (memory $mem)))
                (core module $main
                    (import "host" "count" (func $count (param i32 i32 i64)))
                    (func (export "run") (call $count (i32.const 0) (i32.const 3) (i64.const 5))))
                (core instance $main (instantiate $main
                    (with "host" (instance (export "count" (func $count))))))
                (func (export "run") (canon lift (core func $main "run")))
            )"#
        ))
        .expect("the component text parses")
    }

    #[test]
    fn a_filter_built_against_another_world_version_is_refused_by_name() {
        let runtime = Runtime::new(None, None).expect("the runtime builds");
        for version in ["0.1.0", "0.2.2", "0.3.0"] {
            let (component, _) = runtime
                .compile("old", &counting_component(version))
                .expect("it compiles");
            let Err(error) = runtime.prepare("old", &component) else {
                panic!("a {version} component must be refused");
            };
            let message = error.to_string();
            assert!(
                message.contains(&format!("built against edgegate:filter@{version}")),
                "{message}"
            );
            assert!(message.contains("rebuild it"), "{message}");
        }
    }

    #[test]
    fn a_filter_built_against_an_earlier_patch_version_calls_this_gateways_host() {
        let runtime = Runtime::new(None, None).expect("the runtime builds");
        let (component, _) = runtime
            .compile("old", &counting_component("0.2.0"))
            .expect("it compiles");
        match runtime.prepare("old", &component) {
            Err(FilterError::Link { .. }) => {}
            Err(error) => panic!("past the version check, it lacks the world's exports: {error}"),
            Ok(_) => panic!("it lacks the world's exports"),
        }
        let pre = runtime.link(&component).expect("it links");
        let metrics = FilterMetrics::new();
        let state = HostState::new("old".into(), 1 << 20, Arc::new(NoLookup), metrics.clone());
        let mut store = wasmtime::Store::new(runtime.engine(), state);
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = pre.instantiate(&mut store).expect("it instantiates");
        let run = instance
            .get_typed_func::<(), ()>(&mut store, "run")
            .expect("it exports run");
        run.call(&mut store, ())
            .expect("run calls the host's count, not a stand-in that traps");
        assert_eq!(metrics.guest_counter("old", "old").get(), 5);
    }

    #[test]
    fn every_interface_counted_as_provided_is_defined_by_the_linker() {
        let runtime = Runtime::new(None, None).expect("the runtime builds");
        // One function of each, as a component of an earlier patch version imports it.
        let probe = |name: &str| -> &str {
            match name
                .split_once('@')
                .map_or(name, |(interface, _)| interface)
            {
                "wasi:cli/environment" => {
                    r#"(export "initial-cwd" (func (result (option string))))"#
                }
                "wasi:cli/exit" => r#"(export "exit" (func (param "status" (result))))"#,
                "wasi:clocks/wall-clock" => {
                    r#"(type $t (record (field "seconds" u64) (field "nanoseconds" u32)))
                       (export "datetime" (type $d (eq $t)))
                       (export "now" (func (result $d)))"#
                }
                "wasi:clocks/monotonic-clock" => r#"(export "now" (func (result u64)))"#,
                "wasi:random/random" => r#"(export "get-random-u64" (func (result u64)))"#,
                "wasi:random/insecure" => {
                    r#"(export "get-insecure-random-u64" (func (result u64)))"#
                }
                "wasi:random/insecure-seed" => {
                    r#"(export "insecure-seed" (func (result (tuple u64 u64))))"#
                }
                "edgegate:filter/host" => {
                    r#"(export "count" (func (param "name" string) (param "delta" u64)))"#
                }
                "wasi:cli/stdout" => r#"(export "get-stdout" (func (result u32)))"#,
                other => panic!("no probe for {other}"),
            }
        };
        let imports = |name: &str| {
            let text = format!(
                r#"(component (import "{name}" (instance {})))"#,
                probe(name)
            );
            let wasm = wat::parse_str(text).expect("the component text parses");
            wasmtime::component::Component::new(runtime.engine(), wasm).expect("it compiles")
        };
        // Without stand-ins: the linker itself must find each.
        for name in crate::filter::runtime::host::WASI_INTERFACES
            .into_iter()
            .chain(["edgegate:filter/host@0.2.0"])
        {
            assert!(runtime.provided.provides(name), "{name}");
            let linked = runtime.linker.instantiate_pre(&imports(name));
            assert!(linked.is_ok(), "{name}: {:#}", linked.err().unwrap());
        }
        let stdout = "wasi:cli/stdout@0.2.0";
        assert!(!runtime.provided.provides(stdout));
        assert!(runtime.linker.instantiate_pre(&imports(stdout)).is_err());
    }
}
