//! The multiplexer's metrics: what each shared state holds, the lists and watches it
//! answered, the feeds' lists (every one after the first is a re-list over the link), and
//! the objects sent again to filtered watches.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels naming a pool-scope resource.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// `[group/]version/resource`.
    pub resource: String,
}

/// Labels of an answered request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AnswerLabels {
    /// `[group/]version/resource`.
    pub resource: String,
    /// `list` or `watch`.
    pub verb: &'static str,
}

/// The multiplexer's metrics (cheap to clone: the families are shared).
#[derive(Clone, Default)]
pub struct MultiplexerMetrics {
    /// Objects a shared state holds.
    pub objects: Family<ResourceLabels, Gauge>,
    /// Their bytes (JSON, held once).
    pub object_bytes: Family<ResourceLabels, Gauge>,
    /// Changes in the window watches resume from.
    pub window: Family<ResourceLabels, Gauge>,
    /// Lists the feed made upstream (each replaces the state).
    pub lists: Family<ResourceLabels, Counter>,
    /// Lists and watches answered from a shared state.
    pub answers: Family<AnswerLabels, Counter>,
    /// Objects sent again to filtered watches after a lookup change, to be filtered anew.
    pub resends: Family<ResourceLabels, Counter>,
}

impl MultiplexerMetrics {
    /// Registers the metrics under `edgegate_multiplexer_`.
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("multiplexer");
        registry.register(
            "objects",
            "Objects a shared state holds",
            self.objects.clone(),
        );
        registry.register(
            "object_bytes",
            "Bytes of the objects a shared state holds",
            self.object_bytes.clone(),
        );
        registry.register(
            "window_changes",
            "Changes a shared state keeps for watches to resume from",
            self.window.clone(),
        );
        registry.register(
            "lists",
            "Lists the feed of a shared state made",
            self.lists.clone(),
        );
        registry.register(
            "answers",
            "Lists and watches answered from a shared state",
            self.answers.clone(),
        );
        registry.register(
            "resends",
            "Objects sent again to filtered watches after a lookup change, to be filtered anew (those their filters make the same of are held back)",
            self.resends.clone(),
        );
    }

    /// Sets the gauges of `resource` from its state's size.
    pub(super) fn held(&self, resource: &str, (objects, bytes, window): (usize, usize, usize)) {
        let labels = ResourceLabels {
            resource: resource.to_owned(),
        };
        let set = |family: &Family<ResourceLabels, Gauge>, value: usize| {
            family
                .get_or_create(&labels)
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        };
        set(&self.objects, objects);
        set(&self.object_bytes, bytes);
        set(&self.window, window);
    }

    /// Takes out the gauges of `resource`, which is no longer pool-scope (its counters stay:
    /// they count on if it becomes pool-scope again).
    pub(super) fn forget(&self, resource: &str) {
        let labels = ResourceLabels {
            resource: resource.to_owned(),
        };
        for family in [&self.objects, &self.object_bytes, &self.window] {
            family.remove(&labels);
        }
    }
}
