//! The node's `NodeAutonomy` condition, kept as YurtHub v1.6+ keeps it: `True` when the node
//! is autonomous (annotated `node.beta.openyurt.io/autonomy: "true"`, or
//! `node.openyurt.io/autonomy-duration`, which YurtHub's yurt-manager honours and YurtHub
//! itself overlooks) and its cache works; `False` when autonomy is off or the node is not an
//! edge worker (`openyurt.io/is-edge-worker: "false"`); `Unknown` when the cache has failed
//! at more than three checks in a row. yurt-manager reads it to decide whether the node's
//! pods may keep their endpoints while it is unreachable.
//!
//! The gateway watches its own Node through itself (component `edgegate`, so the watch is
//! cached and resumed like the informers') and patches the condition's status when it
//! changes, only while the cloud is reachable.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::cache::CacheMetrics;
use crate::upstream::HealthWatch;

/// The condition's type.
pub const CONDITION: &str = "NodeAutonomy";
/// The annotation that turns autonomy on (YurtHub's, deprecated in favour of the next).
pub const AUTONOMY_ANNOTATION: &str = "node.beta.openyurt.io/autonomy";
/// The annotation that turns autonomy on with a duration (`0` for unlimited).
pub const AUTONOMY_DURATION_ANNOTATION: &str = "node.openyurt.io/autonomy-duration";
/// The label that says a node is not an edge worker when `"false"`.
pub const EDGE_WORKER_LABEL: &str = "openyurt.io/is-edge-worker";

/// Checks of the cache that must fail in a row before the condition says it failed.
const MAX_CACHE_FAILURES: u32 = 3;
/// How often the condition is checked: kubelet's node status period.
const CHECK_EVERY: Duration = Duration::from_secs(10);

/// What the condition should say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// The condition's reason.
    pub reason: &'static str,
    /// The condition's message.
    pub message: String,
}

/// Whether the cache works, judged from its failure counters at each check.
#[derive(Debug, Default)]
pub struct CacheHealth {
    failures_seen: u64,
    failing_checks: u32,
}

impl CacheHealth {
    /// Takes the cache's failures so far (failed store transactions and damaged stores
    /// replaced); `Err` with a message once they grew at more than three checks in a row,
    /// `Ok(true)` while none grew at the last check, `Ok(false)` in between.
    pub fn check(&mut self, failures: u64) -> Result<bool, String> {
        let grew = failures > self.failures_seen;
        self.failures_seen = failures;
        if !grew {
            self.failing_checks = 0;
            return Ok(true);
        }
        self.failing_checks += 1;
        if self.failing_checks > MAX_CACHE_FAILURES {
            return Err(format!(
                "the cache failed at {} checks in a row ({failures} failures since start)",
                self.failing_checks
            ));
        }
        Ok(false)
    }
}

/// The condition `node` should carry, given the cache's health at this check; `None` to
/// leave it as it is (the cache failing, but not yet for long).
pub fn condition(node: &Node, cache: &Result<bool, String>) -> Option<Condition> {
    let annotations = node.metadata.annotations.as_ref();
    let annotation = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
    let autonomous = annotation(AUTONOMY_ANNOTATION) == Some("true")
        || annotation(AUTONOMY_DURATION_ANNOTATION).is_some_and(|d| !d.is_empty());
    let edge_worker = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(EDGE_WORKER_LABEL))
        .is_none_or(|v| v != "false");
    if !autonomous || !edge_worker {
        return Some(Condition {
            status: "False",
            reason: "autonomy disabled",
            message: "The autonomy is disabled or this node is not edge node".to_owned(),
        });
    }
    match cache {
        Ok(true) => Some(Condition {
            status: "True",
            reason: "autonomy enabled successfully",
            message: "The autonomy is enabled and it works fine".to_owned(),
        }),
        Ok(false) => None,
        Err(message) => Some(Condition {
            status: "Unknown",
            reason: "cache failed",
            message: message.clone(),
        }),
    }
}

/// Whether `node` lacks `condition`: it has no such condition, or one of another status.
pub fn differs(node: &Node, condition: &Condition) -> bool {
    let current = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION));
    current.is_none_or(|c| c.status != condition.status)
}

/// The strategic merge patch of the node's status that sets `condition` (conditions merge by
/// type), stamped `now` (RFC 3339).
pub fn patch(condition: &Condition, now: &str) -> serde_json::Value {
    json!({"status": {"conditions": [{
        "type": CONDITION,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }]}})
}

/// Keeps `node`'s condition, through the gateway's proxy at `proxy`, while the process runs.
pub async fn run(proxy: SocketAddr, node: String, cache: CacheMetrics, health: HealthWatch) {
    let client = match crate::node::informer::client_through(proxy, "autonomy") {
        Ok(client) => client,
        Err(error) => {
            tracing::warn!(error = %crate::error::error_chain(&error), "no client for the node's autonomy condition");
            return;
        }
    };
    let nodes: Api<Node> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    // Backed off: offline, with no Node cached, each list fails at once.
    let mut events = watcher(nodes.clone(), config)
        .default_backoff()
        .applied_objects()
        .boxed();
    let mut current: Option<Node> = None;
    let mut health_of_cache = CacheHealth::default();
    let mut every = tokio::time::interval(CHECK_EVERY);
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(object)) => current = Some(object),
                Some(Err(error)) => tracing::debug!(error = %crate::error::error_chain(&error), "watching this node"),
                None => return,
            },
            _ = every.tick() => {
                let failures = cache.write_errors.get() + cache.store_resets.get();
                let judged = health_of_cache.check(failures);
                let Some(object) = &current else { continue };
                let Some(condition) = condition(object, &judged) else { continue };
                if !*health.borrow() || !differs(object, &condition) {
                    continue;
                }
                let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
                let params = PatchParams::default();
                match nodes.patch_status(&node, &params, &Patch::Strategic(patch(&condition, &now))).await {
                    Ok(updated) => {
                        tracing::info!(%node, status = condition.status, reason = condition.reason, "set the node's {CONDITION} condition");
                        current = Some(updated);
                    }
                    Err(error) => tracing::warn!(%node, error = %crate::error::error_chain(&error), "cannot set the node's {CONDITION} condition"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};

    use super::*;

    fn node(annotations: &[(&str, &str)], labels: &[(&str, &str)]) -> Node {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        let mut node = Node::default();
        node.metadata.annotations = map(annotations);
        node.metadata.labels = map(labels);
        node
    }

    #[test]
    fn autonomy_is_on_with_either_annotation_on_an_edge_worker() {
        let healthy = Ok(true);
        let status = |n: &Node| condition(n, &healthy).map(|v| v.status);
        assert_eq!(status(&node(&[], &[])), Some("False"));
        assert_eq!(
            status(&node(&[(AUTONOMY_ANNOTATION, "true")], &[])),
            Some("True")
        );
        assert_eq!(
            status(&node(&[(AUTONOMY_ANNOTATION, "false")], &[])),
            Some("False")
        );
        assert_eq!(
            status(&node(&[(AUTONOMY_DURATION_ANNOTATION, "0")], &[])),
            Some("True"),
            "0 is unlimited autonomy"
        );
        assert_eq!(
            status(&node(&[(AUTONOMY_DURATION_ANNOTATION, "")], &[])),
            Some("False")
        );
        assert_eq!(
            status(&node(
                &[(AUTONOMY_DURATION_ANNOTATION, "10m")],
                &[(EDGE_WORKER_LABEL, "false")]
            )),
            Some("False")
        );
    }

    #[test]
    fn a_cache_failing_at_more_than_three_checks_in_a_row_makes_it_unknown() {
        let autonomous = node(&[(AUTONOMY_DURATION_ANNOTATION, "10m")], &[]);
        let mut health = CacheHealth::default();
        assert_eq!(health.check(0), Ok(true));
        for failures in 1..=3 {
            let judged = health.check(failures);
            assert_eq!(judged, Ok(false));
            assert_eq!(condition(&autonomous, &judged), None, "left as it was");
        }
        let judged = health.check(4);
        let unknown = condition(&autonomous, &judged).unwrap();
        assert_eq!(
            (unknown.status, unknown.reason),
            ("Unknown", "cache failed")
        );
        // A check without a new failure: it works again.
        assert_eq!(health.check(4), Ok(true));
        assert_eq!(health.check(5), Ok(false), "one failure starts a new count");
    }

    #[test]
    fn only_a_missing_condition_or_another_status_is_patched() {
        let mut autonomous = node(&[(AUTONOMY_ANNOTATION, "true")], &[]);
        let wanted = condition(&autonomous, &Ok(true)).unwrap();
        assert!(differs(&autonomous, &wanted));
        let carried = |status: &str| NodeCondition {
            type_: CONDITION.to_owned(),
            status: status.to_owned(),
            ..NodeCondition::default()
        };
        autonomous.status = Some(NodeStatus {
            conditions: Some(vec![carried("False")]),
            ..NodeStatus::default()
        });
        assert!(differs(&autonomous, &wanted));
        autonomous.status = Some(NodeStatus {
            conditions: Some(vec![carried("True")]),
            ..NodeStatus::default()
        });
        assert!(!differs(&autonomous, &wanted));
        let body = patch(&wanted, "2026-11-26T08:00:00Z");
        assert_eq!(body["status"]["conditions"][0]["type"], CONDITION);
        assert_eq!(body["status"]["conditions"][0]["status"], "True");
    }

    /// The gateway offline with no Node cached: every list of it is answered `404` at once.
    #[tokio::test]
    async fn a_node_that_cannot_be_listed_is_asked_for_again_after_a_backoff_not_at_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = listener.local_addr().unwrap();
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let first = std::sync::Arc::new(tokio::sync::Notify::new());
        let (counted, told) = (asked.clone(), first.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (counted, told) = (counted.clone(), told.clone());
                let service = hyper::service::service_fn(move |_: hyper::Request<_>| {
                    counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    told.notify_one();
                    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": "nothing covering this list is in the local cache",
                        "reason": "NotFound", "code": 404});
                    let mut answer = hyper::Response::new(http_body_util::Full::new(
                        bytes::Bytes::from(status.to_string()),
                    ));
                    *answer.status_mut() = http::StatusCode::NOT_FOUND;
                    async move { Ok::<_, std::convert::Infallible>(answer) }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        let (_health, offline) = tokio::sync::watch::channel(false);
        let running = tokio::spawn(run(
            proxy,
            "edge-1".into(),
            CacheMetrics::default(),
            offline,
        ));
        // Counted from the first request on, however long the machine takes to make it.
        first.notified().await;
        let from = asked.load(std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(2)).await;
        running.abort();
        // Backed off from 0.8 s: two or three tries; at once, thousands.
        let asked = asked.load(std::sync::atomic::Ordering::Relaxed) - from + 1;
        assert!(asked <= 5, "asked {asked} times in 2 s");
    }
}
