//! The node-lease heartbeat: with `--node-name`, a server is probed by renewing the node's
//! Lease in `kube-node-lease` through it, as YurtHub does. kubelet's own writes of that lease
//! are answered by the gateway, online and offline ([`KubeletLease`]), so the two writers
//! never conflict: the heartbeat is the node's lease, renewed while kubelet renews it here.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};

use super::transport::Transport;

/// How long the lease is held: kubelet's default of 40 s.
const LEASE_DURATION_SECONDS: u64 = 40;
/// The largest lease answer read back.
const MAX_ANSWER: usize = 64 << 10;
/// The namespace of node leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// kubelet's renewals of its node lease, which the gateway answers itself: the heartbeat
/// renews the lease in the cloud only while kubelet has renewed it here within a lease
/// duration, so a node whose kubelet stopped goes NotReady as it would without a gateway.
#[derive(Debug, Default)]
pub struct KubeletLease {
    renewed: Mutex<Option<Instant>>,
}

impl KubeletLease {
    /// Notes a renewal by kubelet, now.
    pub fn renewed(&self) {
        *self.renewed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    /// Whether kubelet renewed within the lease's duration.
    pub fn alive(&self) -> bool {
        self.renewed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| at.elapsed().as_secs() < LEASE_DURATION_SECONDS)
    }
}

/// Probes `server` through `node`'s lease: renews (or creates) it while `kubelet_alive`, and
/// otherwise only reads it. True when the server answered as a healthy apiserver does (a
/// conflict with another writer counts as an answer).
pub async fn renew(
    transport: &Transport,
    server: &http::Uri,
    node: &str,
    kubelet_alive: bool,
    seen: &AtomicU64,
) -> bool {
    let path =
        format!("/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases/{node}");
    let Some((status, current)) = exchange(transport, server, Method::GET, &path, None).await
    else {
        return false;
    };
    if !kubelet_alive {
        return matches!(status, StatusCode::OK | StatusCode::NOT_FOUND);
    }
    let renewed = match status {
        StatusCode::OK => lease(node, serde_json::from_slice(&current).ok(), None),
        StatusCode::NOT_FOUND => lease(node, None, node_uid(transport, server, node).await),
        _ => return false,
    };
    let (method, target) = if status == StatusCode::OK {
        (Method::PUT, path)
    } else {
        (
            Method::POST,
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases".to_owned(),
        )
    };
    match exchange(transport, server, method, &target, Some(renewed)).await {
        Some((status, lease)) => {
            if status.is_success() {
                note_version(&lease, seen);
            }
            status.is_success() || status == StatusCode::CONFLICT
        }
        None => false,
    }
}

/// Notes the resourceVersion of `object` in `seen`, if it is the highest so far.
fn note_version(object: &[u8], seen: &AtomicU64) {
    let version = crate::stream::Meta::parse(object)
        .ok()
        .and_then(|meta| meta.resource_version.parse::<u64>().ok());
    if let Some(version) = version {
        seen.fetch_max(version, Ordering::Relaxed);
    }
}

/// The uid of `node`, which a new lease names as its owner (as kubelet's does, so the
/// lease goes with the Node); `None` when the Node cannot be read.
async fn node_uid(transport: &Transport, server: &http::Uri, node: &str) -> Option<String> {
    let path = format!("/api/v1/nodes/{node}");
    let (status, body) = exchange(transport, server, Method::GET, &path, None).await?;
    if status != StatusCode::OK {
        return None;
    }
    let node: serde_json::Value = serde_json::from_slice(&body).ok()?;
    node["metadata"]["uid"].as_str().map(str::to_owned)
}

/// The lease to write: the current one (its resourceVersion guards the update) with this
/// node as holder and a fresh renew time, or a new one, owned by the Node of `owner_uid`.
fn lease(node: &str, current: Option<serde_json::Value>, owner_uid: Option<String>) -> Bytes {
    let renew_time = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
    let mut lease = current.unwrap_or_else(|| {
        let mut metadata = serde_json::json!({"name": node, "namespace": NODE_LEASE_NAMESPACE});
        if let Some(uid) = owner_uid {
            metadata["ownerReferences"] = serde_json::json!([
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}
            ]);
        }
        serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {},
        })
    });
    lease["spec"]["holderIdentity"] = node.into();
    lease["spec"]["leaseDurationSeconds"] = LEASE_DURATION_SECONDS.into();
    lease["spec"]["renewTime"] = renew_time.into();
    Bytes::from(lease.to_string())
}

/// One request on the gateway's identity; the status and body, or `None` if the server did
/// not answer.
async fn exchange(
    transport: &Transport,
    server: &http::Uri,
    method: Method,
    path: &str,
    body: Option<Bytes>,
) -> Option<(StatusCode, Bytes)> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::USER_AGENT, "edgegate/heartbeat");
    if body.is_some() {
        builder = builder.header(http::header::CONTENT_TYPE, "application/json");
    }
    let body = Full::new(body.unwrap_or_default())
        .map_err(|never| match never {})
        .boxed_unsync();
    let response = transport
        .send(server, builder.body(body).ok()?)
        .await
        .ok()?;
    let status = response.status();
    let bytes = Limited::new(response.into_body(), MAX_ANSWER)
        .collect()
        .await
        .ok()?
        .to_bytes();
    Some((status, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_is_alive_only_after_a_renewal() {
        let kubelet = KubeletLease::default();
        assert!(!kubelet.alive(), "no renewal yet");
        kubelet.renewed();
        assert!(kubelet.alive());
        *kubelet.renewed.lock().unwrap() =
            Instant::now().checked_sub(std::time::Duration::from_secs(LEASE_DURATION_SECONDS));
        assert!(
            !kubelet.alive(),
            "a renewal a lease duration ago has run out"
        );
    }

    #[test]
    fn a_renewal_keeps_the_version_and_takes_the_lease() {
        let current = serde_json::json!({
            "metadata": {"name": "edge-1", "namespace": "kube-node-lease", "resourceVersion": "42"},
            "spec": {"holderIdentity": "edge-1", "renewTime": "2020-01-01T00:00:00.000000Z"},
        });
        let renewed: serde_json::Value =
            serde_json::from_slice(&lease("edge-1", Some(current), None)).unwrap();
        assert_eq!(renewed["metadata"]["resourceVersion"], "42");
        assert_eq!(renewed["spec"]["holderIdentity"], "edge-1");
        assert_eq!(renewed["spec"]["leaseDurationSeconds"], 40);
        assert_ne!(renewed["spec"]["renewTime"], "2020-01-01T00:00:00.000000Z");
    }

    #[test]
    fn a_new_lease_names_the_node() {
        let created: serde_json::Value =
            serde_json::from_slice(&lease("edge-2", None, Some("uid-2".to_owned()))).unwrap();
        assert_eq!(created["kind"], "Lease");
        assert_eq!(
            created["metadata"]["ownerReferences"][0],
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "name": "edge-2", "uid": "uid-2"})
        );
        assert_eq!(created["metadata"]["name"], "edge-2");
        assert_eq!(created["metadata"]["namespace"], "kube-node-lease");
        assert!(
            created["spec"]["renewTime"]
                .as_str()
                .unwrap()
                .ends_with('Z')
        );
    }
}
