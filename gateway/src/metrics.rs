//! The gateway's Prometheus metrics, served by the hub server on `/metrics`.
//!
//! Label values that come from clients (the component from `User-Agent`, the resource from
//! the URL) pass through a [`BoundedLabels`] set, so a hostile client cannot grow the
//! registry without limit.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of one kind of proxied request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The component, from `User-Agent`.
    pub component: String,
    /// The Kubernetes verb.
    pub verb: String,
    /// The resource (`pods`, `services`, …); empty for non-resource requests.
    pub resource: String,
}

/// Labels of a finished request: its kind and the status code class.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResponseLabels {
    /// The component, from `User-Agent`.
    pub component: String,
    /// The Kubernetes verb.
    pub verb: String,
    /// The resource; empty for non-resource requests.
    pub resource: String,
    /// The HTTP status code.
    pub code: String,
}

/// Labels naming one upstream apiserver.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerLabels {
    /// The server's URL as given to `--server-addr`.
    pub server: String,
}

/// Labels of an error answered by the gateway itself.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// Who is at fault: `client`, `upstream` or `internal`.
    pub fault: &'static str,
    /// The step that failed.
    pub kind: &'static str,
}

/// Every metric the gateway exports, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    /// Proxied requests by component, verb, resource and status code.
    pub requests: Family<ResponseLabels, Counter>,
    /// Requests being served right now (watches count until they end).
    pub in_flight: Family<RequestLabels, Gauge>,
    /// Response body bytes sent to clients.
    pub response_bytes: Family<RequestLabels, Counter>,
    /// 1 while an upstream server is healthy, else 0.
    pub upstream_healthy: Family<ServerLabels, Gauge>,
    /// Health changes of upstream servers.
    pub upstream_health_changes: Family<ServerLabels, Counter>,
    /// Requests sent again to another server after this one could not answer them.
    pub upstream_failovers: Family<ServerLabels, Counter>,
    /// Errors the gateway answered itself, by fault and kind.
    pub errors: Family<ErrorLabels, Counter>,
    /// Tasks alive in the async runtime, read when the metrics are encoded.
    tasks: Gauge,
    components: BoundedLabels,
    resources: BoundedLabels,
}

/// How many distinct components and resources get their own label value; beyond that they
/// are counted as `other`. Real nodes run a few dozen components over a hundred-odd resources.
const MAX_COMPONENTS: usize = 64;
const MAX_RESOURCES: usize = 256;

impl Metrics {
    /// Creates the metrics and registers them.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("edgegate");
        let requests = Family::<ResponseLabels, Counter>::default();
        let in_flight = Family::<RequestLabels, Gauge>::default();
        let response_bytes = Family::<RequestLabels, Counter>::default();
        let upstream_healthy = Family::<ServerLabels, Gauge>::default();
        let upstream_health_changes = Family::<ServerLabels, Counter>::default();
        let upstream_failovers = Family::<ServerLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let tasks = Gauge::default();
        registry.register(
            "requests",
            "Proxied requests by component, verb, resource and status code",
            requests.clone(),
        );
        registry.register(
            "in_flight_requests",
            "Requests being served (watches count until they end)",
            in_flight.clone(),
        );
        registry.register(
            "response_bytes",
            "Response body bytes sent to clients",
            response_bytes.clone(),
        );
        registry.register(
            "upstream_healthy",
            "1 while an upstream apiserver is healthy",
            upstream_healthy.clone(),
        );
        registry.register(
            "upstream_health_changes",
            "Health changes of upstream apiservers",
            upstream_health_changes.clone(),
        );
        registry.register(
            "upstream_failovers",
            "Requests sent again to another apiserver after this one could not answer them",
            upstream_failovers.clone(),
        );
        registry.register(
            "errors",
            "Errors answered by the gateway itself, by fault and kind",
            errors.clone(),
        );
        registry.register(
            "runtime_alive_tasks",
            "Tasks alive in the gateway's async runtime (every connection, watch and informer holds some)",
            tasks.clone(),
        );
        Metrics {
            registry,
            requests,
            in_flight,
            response_bytes,
            upstream_healthy,
            upstream_health_changes,
            upstream_failovers,
            errors,
            tasks,
            components: BoundedLabels::new(MAX_COMPONENTS),
            resources: BoundedLabels::new(MAX_RESOURCES),
        }
    }

    /// The registry, for modules that register metric families of their own (before the
    /// metrics are shared).
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The labels of a request, with client-chosen values bounded.
    pub fn request_labels(&self, component: &str, verb: &str, resource: &str) -> RequestLabels {
        RequestLabels {
            component: self.components.admit(component),
            verb: verb.to_owned(),
            resource: self.resources.admit(resource),
        }
    }

    /// The registry in Prometheus text format.
    pub fn encode(&self) -> String {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let alive = runtime.metrics().num_alive_tasks();
            self.tasks.set(i64::try_from(alive).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// A label dimension that keeps its first `cap` values and folds the rest into `other`.
struct BoundedLabels {
    cap: usize,
    seen: Mutex<HashSet<Arc<str>>>,
}

impl BoundedLabels {
    fn new(cap: usize) -> BoundedLabels {
        BoundedLabels {
            cap,
            seen: Mutex::new(HashSet::new()),
        }
    }

    fn admit(&self, value: &str) -> String {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if seen.contains(value) {
            return value.to_owned();
        }
        if seen.len() < self.cap {
            seen.insert(Arc::from(value));
            return value.to_owned();
        }
        "other".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_chosen_labels_are_bounded() {
        let metrics = Metrics::new();
        for i in 0..1000 {
            let labels = metrics.request_labels(&format!("agent{i}"), "get", "pods");
            metrics
                .requests
                .get_or_create(&ResponseLabels {
                    component: labels.component,
                    verb: labels.verb,
                    resource: labels.resource,
                    code: "200".into(),
                })
                .inc();
        }
        let text = metrics.encode();
        let series = text
            .lines()
            .filter(|l| l.starts_with("edgegate_requests_total"))
            .count();
        assert_eq!(series, MAX_COMPONENTS + 1);
        assert!(text.contains(r#"component="other""#));
        assert_eq!(
            metrics.request_labels("agent3", "get", "pods").component,
            "agent3"
        );
    }

    fn alive_tasks(metrics: &Metrics) -> Option<f64> {
        metrics
            .encode()
            .lines()
            .find_map(|l| l.strip_prefix("edgegate_runtime_alive_tasks "))
            .and_then(|v| v.parse().ok())
    }

    #[tokio::test]
    async fn the_tasks_gauge_follows_the_runtimes_tasks() {
        let metrics = Metrics::new();
        assert_eq!(alive_tasks(&metrics), Some(0.0));
        let (senders, tasks): (Vec<_>, Vec<_>) = (0..3)
            .map(|_| {
                let (send, receive) = tokio::sync::oneshot::channel::<()>();
                (send, tokio::spawn(receive))
            })
            .unzip();
        assert_eq!(alive_tasks(&metrics), Some(3.0));
        drop(senders);
        for task in tasks {
            let _ = task.await;
        }
        assert_eq!(alive_tasks(&metrics), Some(0.0));
    }
}
