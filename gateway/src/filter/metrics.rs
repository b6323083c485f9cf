//! Per-filter metrics: calls, decisions, failures by kind, call latency, the counters filters
//! bump themselves, the live generation and load failures. Cheap to clone (shared families).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Counter names one filter may create through `count`; later names are counted as `other`,
/// so a filter cannot grow the registry without limit.
pub(crate) const MAX_GUEST_COUNTERS: usize = 32;

/// Labels naming a filter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FilterLabels {
    /// The filter's name.
    pub filter: String,
}

/// Labels of a filter and one kind of outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// The filter's name.
    pub filter: String,
    /// `keep`, `drop` or `replace` for decisions; `trap`, `deadline`, `memory`,
    /// `oversized`, `bad_output` or `instantiate` for failures.
    pub kind: &'static str,
}

/// Labels of where a compile or a config check ran.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PlaceLabels {
    /// `child` (a child process of the gateway's binary) or `gateway` (its own process).
    pub place: &'static str,
}

/// Labels of a counter a filter bumps itself.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestCounterLabels {
    /// The filter's name.
    pub filter: String,
    /// The counter's name as the filter gave it.
    pub name: String,
}

/// One filter's call and decision series: handles on the shared families' entries.
#[derive(Clone, Debug)]
pub(crate) struct CallMetrics {
    calls: Counter,
    latency: Histogram,
    keep: Counter,
    drop: Counter,
    replace: Counter,
}

impl CallMetrics {
    /// Counts a call that took `seconds`.
    pub(crate) fn call(&self, seconds: f64) {
        self.calls.inc();
        self.latency.observe(seconds);
    }

    /// Counts a keep decision.
    pub(crate) fn keep(&self) {
        self.keep.inc();
    }

    /// Counts a drop decision.
    pub(crate) fn drop(&self) {
        self.drop.inc();
    }

    /// Counts a replace decision.
    pub(crate) fn replace(&self) {
        self.replace.inc();
    }
}

/// The filter metrics.
#[derive(Clone)]
pub struct FilterMetrics {
    pub(crate) calls: Family<FilterLabels, Counter>,
    pub(crate) decisions: Family<OutcomeLabels, Counter>,
    pub(crate) failures: Family<OutcomeLabels, Counter>,
    pub(crate) latency: Family<FilterLabels, Histogram>,
    pub(crate) guest: Family<GuestCounterLabels, Counter>,
    pub(crate) generation: Gauge,
    pub(crate) load_failures: Counter,
    pub(crate) compiles: Family<PlaceLabels, Counter>,
    pub(crate) stored_loads: Counter,
    /// Stored files of compiled code or functions refused: their seal did not verify.
    pub(crate) stored_rejects: Counter,
    pub(crate) config_checks: Family<PlaceLabels, Counter>,
    /// Instances replaced because a call left them unusable (a trap, a limit).
    pub(crate) reloads: Family<FilterLabels, Counter>,
    /// Filters turned off by their `[disable-after]`.
    pub(crate) turned_off: Family<FilterLabels, Counter>,
    /// The largest linear memory an instance of the filter has grown to.
    pub(crate) memory: Family<FilterLabels, Gauge>,
    guest_names: Arc<Mutex<HashMap<String, HashSet<String>>>>,
}

impl FilterMetrics {
    /// Metrics that are not registered anywhere (CLI tools, tests); see [`Self::register`].
    pub fn new() -> FilterMetrics {
        FilterMetrics {
            calls: Family::default(),
            decisions: Family::default(),
            failures: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            guest: Family::default(),
            generation: Gauge::default(),
            load_failures: Counter::default(),
            compiles: Family::default(),
            stored_loads: Counter::default(),
            stored_rejects: Counter::default(),
            config_checks: Family::default(),
            reloads: Family::default(),
            turned_off: Family::default(),
            memory: Family::default(),
            guest_names: Arc::default(),
        }
    }

    /// Registers every family under `filter_` in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("filter");
        registry.register("calls", "Calls into a filter", self.calls.clone());
        registry.register(
            "decisions",
            "Filter decisions by kind (keep, drop, replace)",
            self.decisions.clone(),
        );
        registry.register(
            "failures",
            "Failed filter calls by kind (trap, deadline, memory, oversized, bad_output, instantiate)",
            self.failures.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "Duration of one call into a filter",
            self.latency.clone(),
        );
        registry.register(
            "guest",
            "Counters a filter bumps through its count import",
            self.guest.clone(),
        );
        registry.register(
            "generation",
            "Number of the filter generation being served",
            self.generation.clone(),
        );
        registry.register(
            "load_failures",
            "Filter directory loads that failed (the previous generation kept serving)",
            self.load_failures.clone(),
        );
        registry.register(
            "compiles",
            "New filter components compiled, by place (child process or the gateway's own)",
            self.compiles.clone(),
        );
        registry.register(
            "stored_loads",
            "Filter components mapped from the compiled-code store instead of compiled",
            self.stored_loads.clone(),
        );
        registry.register(
            "stored_rejects",
            "Files of the compiled-code store refused, not mapped, because their seal did not verify (compiled again)",
            self.stored_rejects.clone(),
        );
        registry.register(
            "config_checks",
            "Filter configs checked against their schemas, by place (child process or the gateway's own)",
            self.config_checks.clone(),
        );
        registry.register(
            "instance_reloads",
            "Filter instances replaced by fresh ones because a call trapped or hit a limit",
            self.reloads.clone(),
        );
        registry.register(
            "turned_off",
            "Filters turned off by their [disable-after] (failing again and again): their on-error policy applies to every object until they are loaded again",
            self.turned_off.clone(),
        );
        registry.register(
            "instance_memory_bytes",
            "The largest linear memory an instance of the filter has grown to",
            self.memory.clone(),
        );
    }

    /// Counts an instance of `filter` replaced after a call left it unusable.
    pub(crate) fn reloaded(&self, filter: &str) {
        self.reloads.get_or_create(&labels(filter)).inc();
    }

    /// Counts `filter` turned off by its `[disable-after]`.
    pub(crate) fn turned_off(&self, filter: &str) {
        self.turned_off.get_or_create(&labels(filter)).inc();
    }

    /// The largest linear memory an instance of `filter` has grown to.
    pub(crate) fn memory_of(&self, filter: &str) -> u64 {
        u64::try_from(self.memory.get_or_create(&labels(filter)).get()).unwrap_or(0)
    }

    /// Notes an instance of `filter` whose linear memory grew to `bytes`.
    pub(crate) fn memory_grew(&self, filter: &str, bytes: usize) {
        let gauge = self.memory.get_or_create(&labels(filter));
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        if gauge.get() < bytes {
            gauge.set(bytes);
        }
    }

    /// Counts a component compiled at `place`.
    pub(crate) fn compiled(&self, place: Place) {
        self.compiles
            .get_or_create(&PlaceLabels {
                place: place.label(),
            })
            .inc();
    }

    /// Counts a config checked at `place`.
    pub(crate) fn config_checked(&self, place: Place) {
        self.config_checks
            .get_or_create(&PlaceLabels {
                place: place.label(),
            })
            .inc();
    }

    /// Counts a failure of `kind` of `filter`.
    pub(crate) fn failure(&self, filter: &str, kind: &'static str) {
        self.failures
            .get_or_create(&OutcomeLabels {
                filter: filter.to_owned(),
                kind,
            })
            .inc();
    }

    /// The per-call metrics of `filter`, resolved once so that a call looks no label up.
    pub(crate) fn for_filter(&self, filter: &str) -> CallMetrics {
        let labels = labels(filter);
        let decision = |kind| {
            let labels = OutcomeLabels {
                filter: filter.to_owned(),
                kind,
            };
            self.decisions.get_or_create(&labels).clone()
        };
        CallMetrics {
            calls: self.calls.get_or_create(&labels).clone(),
            latency: self.latency.get_or_create(&labels).clone(),
            keep: decision("keep"),
            drop: decision("drop"),
            replace: decision("replace"),
        }
    }

    /// The counter `name` of `filter` that the filter's `count` calls add to: its own
    /// series, or `other` once the filter has named [`MAX_GUEST_COUNTERS`] others.
    pub(crate) fn guest_counter(&self, filter: &str, name: &str) -> Counter {
        let name = {
            let mut names = self
                .guest_names
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let seen = match names.get_mut(filter) {
                Some(seen) => seen,
                None => names.entry(filter.to_owned()).or_default(),
            };
            if !seen.contains(name) && seen.len() < MAX_GUEST_COUNTERS {
                seen.insert(name.to_owned());
            }
            if seen.contains(name) { name } else { "other" }.to_owned()
        };
        self.guest
            .get_or_create(&GuestCounterLabels {
                filter: filter.to_owned(),
                name,
            })
            .clone()
    }
}

impl Default for FilterMetrics {
    fn default() -> Self {
        FilterMetrics::new()
    }
}

fn labels(filter: &str) -> FilterLabels {
    FilterLabels {
        filter: filter.to_owned(),
    }
}

/// Buckets from 10 µs (a keep on a small object) to about 1.3 s (past any deadline).
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-6, 4.0, 9))
}

/// Where a piece of the gateway's work ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// In a child process (compiled code then mapped from the compiled-code store).
    Child,
    /// In the gateway's own process (no child configured, or the child failed).
    Gateway,
}

impl Place {
    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Place::Child => "child",
            Place::Gateway => "gateway",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_names_at_most_its_share_of_counters_and_the_rest_count_as_other() {
        let metrics = FilterMetrics::new();
        for n in 0..MAX_GUEST_COUNTERS + 5 {
            metrics.guest_counter("f", &format!("c{n}")).inc_by(2);
        }
        metrics.guest_counter("f", "c0").inc();
        metrics.guest_counter("g", "c0").inc();
        let value = |filter: &str, name: &str| {
            metrics
                .guest
                .get_or_create(&GuestCounterLabels {
                    filter: filter.into(),
                    name: name.into(),
                })
                .get()
        };
        assert_eq!(value("f", "c0"), 3, "a name seen before keeps its series");
        assert_eq!(value("f", &format!("c{}", MAX_GUEST_COUNTERS - 1)), 2);
        assert_eq!(value("f", "other"), 10, "five names beyond the cap");
        assert_eq!(value("f", &format!("c{MAX_GUEST_COUNTERS}")), 0);
        assert_eq!(value("g", "c0"), 1, "each filter has its own share");
    }
}
