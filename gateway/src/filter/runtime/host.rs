//! What a filter instance's store holds, and the host side of its imports: the world's
//! `host` interface (lookups, log, count) and the little of WASI a `wasm32-wasip2` guest's
//! std reads, with nothing granted: no environment or arguments, a frozen clock and fixed
//! "randomness".
//!
//! Stdio, filesystem, socket and polling functions are not linked at all (each is a stand-in
//! that traps when called, see [`super::trapping_imports`]): wasmtime-wasi's synchronous stream and
//! poll functions block on a Tokio runtime, which would panic on the runtime worker a filter
//! call runs on, or outlast the call's deadline (a sleep). The SDK sends panic messages to
//! `log` instead of stderr, so nothing a well-behaved filter does reaches them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use edgegate_filter_sdk::LabelSelector;
use prometheus_client::metrics::counter::Counter;
use wasmtime::component::{HasData, Linker, LinkerInstance, Resource, ResourceTable, ResourceType};
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::io::poll::HostPollable;
use wasmtime_wasi::p2::bindings::{cli, clocks, random};
use wasmtime_wasi::random::WasiRandom;
use wasmtime_wasi::{
    Deterministic, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView,
};

use super::bindings::{HostImports, Level, TypesHost};
use crate::filter::lookup::{CallReads, Lookup};
use crate::filter::metrics::{FilterMetrics, MAX_GUEST_COUNTERS};

/// Longest log line a filter may write; the rest is cut, so a filter cannot flood the log
/// with one call.
const MAX_LOG_LINE: usize = 1024;
/// Log lines one instance may write between two calls (each call resets the budget).
const LOG_LINES_PER_CALL: u32 = 32;

/// The state of one filter instance's store.
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    /// Set when the memory cap refused a growth, so the trap that follows is told apart.
    pub(crate) memory_refused: bool,
    /// What the current call's lookups read (see [`Lookup::feed`]).
    pub(crate) reads: CallReads,
    filter: Arc<str>,
    lookup: Arc<dyn Lookup>,
    metrics: FilterMetrics,
    /// The counters this instance's `count` calls named, resolved on first use, so that a
    /// count is an addition and not a lookup of its labels.
    counters: HashMap<String, Counter>,
    log_budget: u32,
}

impl HostState {
    /// The state of a new instance of `filter`, with its memory capped at `memory` bytes.
    pub(crate) fn new(
        filter: Arc<str>,
        memory: usize,
        lookup: Arc<dyn Lookup>,
        metrics: FilterMetrics,
    ) -> HostState {
        // Fixed bytes, not entropy: a filter gets no randomness the host did not grant,
        // and its behaviour is reproducible.
        let fixed = || Deterministic::new(vec![0x5e, 0xed, 0x0f, 0xed]);
        let wasi = WasiCtx::builder()
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .secure_random(fixed())
            .insecure_random(fixed())
            .insecure_random_seed(0)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        HostState {
            wasi,
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(memory)
                .instances(64)
                .build(),
            memory_refused: false,
            reads: CallReads::default(),
            filter,
            lookup,
            metrics,
            counters: HashMap::new(),
            log_budget: LOG_LINES_PER_CALL,
        }
    }

    /// Notes a `list` of `resource` of `group`: the whole feed is read.
    fn read_feed(&mut self, group: &str, resource: &str) {
        if let Some(bit) = self.lookup.feed(group, resource).filter(|bit| *bit < 64) {
            self.reads.feeds |= 1 << bit;
        }
    }

    /// Notes a `get` of one object.
    fn read_key(&mut self, group: &str, resource: &str, namespace: Option<&str>, name: &str) {
        if let Some(read) = self.lookup.key(group, resource, namespace, name) {
            self.reads.keys.push(read);
        }
    }

    /// Readies the state for the next call.
    pub(crate) fn start_call(&mut self) {
        self.memory_refused = false;
        self.reads.clear();
        self.log_budget = LOG_LINES_PER_CALL;
    }
}

impl ResourceLimiter for HostState {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum)?;
        self.memory_refused |= !allowed;
        if allowed {
            self.metrics.memory_grew(&self.filter, desired);
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

/// A clock that always reads zero: filters get no time from the host.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The WASI interfaces [`add_wasi_to_linker`] defines, at the WASI 0.2 track wasmtime-wasi's
/// `p2` implements: a component's import of any 0.2 version of them finds these.
pub(crate) const WASI_INTERFACES: [&str; 7] = [
    "wasi:cli/environment@0.2.0",
    "wasi:cli/exit@0.2.0",
    "wasi:clocks/wall-clock@0.2.0",
    "wasi:clocks/monotonic-clock@0.2.0",
    "wasi:random/random@0.2.0",
    "wasi:random/insecure@0.2.0",
    "wasi:random/insecure-seed@0.2.0",
];

/// The interface of the pollable `monotonic-clock`'s `subscribe-*` hand out.
pub(crate) const WASI_POLL: &str = "wasi:io/poll@0.2.0";

/// Defines `wasi:io/poll`'s pollable, which the gateway does not provide, as the resource
/// type `monotonic-clock` hands out, so that a filter whose code could sleep links (its
/// `block` traps when called); dropping one frees it.
pub(crate) fn define_pollable(
    linker: &mut LinkerInstance<'_, HostState>,
    name: &str,
) -> wasmtime::Result<()> {
    linker.resource(
        name,
        ResourceType::host::<DynPollable>(),
        |mut store, rep| HostPollable::drop(&mut store.data_mut().table, Resource::new_own(rep)),
    )
}

/// Links the WASI functions a guest's std needs at start-up ([`WASI_INTERFACES`]); see the
/// module doc.
pub(crate) fn add_wasi_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    fn random_ctx(state: &mut HostState) -> <WasiRandom as HasData>::Data<'_> {
        state.wasi.random()
    }
    cli::environment::add_to_linker::<HostState, WasiCli>(linker, HostState::cli)?;
    cli::exit::add_to_linker::<HostState, WasiCli>(linker, HostState::cli)?;
    clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(linker, HostState::clocks)?;
    clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(linker, HostState::clocks)?;
    random::random::add_to_linker::<HostState, WasiRandom>(linker, random_ctx)?;
    random::insecure::add_to_linker::<HostState, WasiRandom>(linker, random_ctx)?;
    random::insecure_seed::add_to_linker::<HostState, WasiRandom>(linker, random_ctx)?;
    Ok(())
}

impl TypesHost for HostState {}

impl HostImports for HostState {
    fn get(
        &mut self,
        group: String,
        version: String,
        resource: String,
        namespace: Option<String>,
        name: String,
    ) -> wasmtime::Result<Option<Vec<u8>>> {
        self.read_key(&group, &resource, namespace.as_deref(), &name);
        let found = self
            .lookup
            .get(&group, &version, &resource, namespace.as_deref(), &name);
        Ok(found.map(|bytes| bytes.to_vec()))
    }

    fn list(
        &mut self,
        group: String,
        version: String,
        resource: String,
        namespace: Option<String>,
        label_selector: String,
    ) -> wasmtime::Result<Vec<Vec<u8>>> {
        let selector = LabelSelector::parse(&label_selector).map_err(|error| {
            wasmtime::format_err!("list: bad label selector {label_selector:?}: {error}")
        })?;
        self.read_feed(&group, &resource);
        let found: Vec<Bytes> =
            self.lookup
                .list(&group, &version, &resource, namespace.as_deref(), &selector);
        Ok(found.into_iter().map(|bytes| bytes.to_vec()).collect())
    }

    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        // A line the log would not show takes nothing from the budget of those it would.
        if self.log_budget == 0 || !enabled(level) {
            return Ok(());
        }
        self.log_budget -= 1;
        let mut message = message;
        if message.len() > MAX_LOG_LINE {
            let mut cut = MAX_LOG_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        let filter = &*self.filter;
        match level {
            Level::Trace => tracing::trace!(filter, "{message}"),
            Level::Debug => tracing::debug!(filter, "{message}"),
            Level::Info => tracing::info!(filter, "{message}"),
            Level::Warn => tracing::warn!(filter, "{message}"),
            Level::Error => tracing::error!(filter, "{message}"),
        }
        Ok(())
    }

    fn log_enabled(&mut self, level: Level) -> wasmtime::Result<bool> {
        Ok(self.log_budget > 0 && enabled(level))
    }

    fn count(&mut self, name: String, delta: u64) -> wasmtime::Result<()> {
        if let Some(counter) = self.counters.get(&name) {
            counter.inc_by(delta);
            return Ok(());
        }
        let counter = self.metrics.guest_counter(&self.filter, &name);
        counter.inc_by(delta);
        // Names beyond the cap all count as `other` and are looked up each time, so a filter
        // naming a new counter every call cannot grow this map either.
        if self.counters.len() < MAX_GUEST_COUNTERS {
            self.counters.insert(name, counter);
        }
        Ok(())
    }
}

/// Whether the gateway's log shows lines of `level` from a filter.
fn enabled(level: Level) -> bool {
    match level {
        Level::Trace => tracing::enabled!(tracing::Level::TRACE),
        Level::Debug => tracing::enabled!(tracing::Level::DEBUG),
        Level::Info => tracing::enabled!(tracing::Level::INFO),
        Level::Warn => tracing::enabled!(tracing::Level::WARN),
        Level::Error => tracing::enabled!(tracing::Level::ERROR),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Mutex;

    use super::*;
    use crate::filter::NoLookup;

    /// Log output collected in memory.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn state(metrics: FilterMetrics) -> HostState {
        HostState::new("f".into(), 1 << 20, Arc::new(NoLookup), metrics)
    }

    #[test]
    fn lines_the_log_would_not_show_leave_the_budget_to_those_it_would() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let mut state = state(FilterMetrics::new());
            for n in 0..2 * LOG_LINES_PER_CALL {
                state.log(Level::Debug, format!("hidden {n}")).unwrap();
            }
            for n in 0..LOG_LINES_PER_CALL + 1 {
                state.log(Level::Warn, format!("shown {n}")).unwrap();
            }
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("hidden"), "{text}");
        assert_eq!(text.matches("shown").count(), LOG_LINES_PER_CALL as usize);
        assert!(text.contains(&format!("shown {}", LOG_LINES_PER_CALL - 1)));
    }

    #[test]
    fn a_count_adds_to_the_filters_series_from_the_first_call_on() {
        let metrics = FilterMetrics::new();
        let mut one = state(metrics.clone());
        let mut two = state(metrics.clone());
        one.count("pruned".into(), 2).unwrap();
        one.count("pruned".into(), 3).unwrap();
        two.count("pruned".into(), 4).unwrap();
        assert_eq!(metrics.guest_counter("f", "pruned").get(), 9);
    }
}
