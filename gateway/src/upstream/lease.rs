//! The node-lease heartbeat: with `--node-name`, a server is probed by renewing the node's
//! Lease in `kube-node-lease` through it, as YurtHub does, so the probe doubles as the node's
//! heartbeat while kubelet's own renewals are answered locally offline.

use std::time::SystemTime;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};

use super::transport::Transport;

/// How long the lease is held: kubelet's default of 40 s.
const LEASE_DURATION_SECONDS: u64 = 40;
/// The largest lease answer read back.
const MAX_ANSWER: usize = 64 << 10;

/// Renews (or creates) `node`'s lease through `server`; true when the server answered as a
/// healthy apiserver does (a conflict with kubelet's own renewal counts as an answer).
pub async fn renew(transport: &Transport, server: &http::Uri, node: &str) -> bool {
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}");
    let Some((status, current)) = exchange(transport, server, Method::GET, &path, None).await
    else {
        return false;
    };
    let renewed = match status {
        StatusCode::OK => lease(node, serde_json::from_slice(&current).ok()),
        StatusCode::NOT_FOUND => lease(node, None),
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
        Some((status, _)) => status.is_success() || status == StatusCode::CONFLICT,
        None => false,
    }
}

/// The lease to write: the current one (its resourceVersion guards the update) with this
/// node as holder and a fresh renew time, or a new one.
fn lease(node: &str, current: Option<serde_json::Value>) -> Bytes {
    let renew_time = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
    let mut lease = current.unwrap_or_else(|| {
        serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": node, "namespace": "kube-node-lease"},
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
    fn a_renewal_keeps_the_version_and_takes_the_lease() {
        let current = serde_json::json!({
            "metadata": {"name": "edge-1", "namespace": "kube-node-lease", "resourceVersion": "42"},
            "spec": {"holderIdentity": "edge-1", "renewTime": "2020-01-01T00:00:00.000000Z"},
        });
        let renewed: serde_json::Value =
            serde_json::from_slice(&lease("edge-1", Some(current))).unwrap();
        assert_eq!(renewed["metadata"]["resourceVersion"], "42");
        assert_eq!(renewed["spec"]["holderIdentity"], "edge-1");
        assert_eq!(renewed["spec"]["leaseDurationSeconds"], 40);
        assert_ne!(renewed["spec"]["renewTime"], "2020-01-01T00:00:00.000000Z");
    }

    #[test]
    fn a_new_lease_names_the_node() {
        let created: serde_json::Value = serde_json::from_slice(&lease("edge-2", None)).unwrap();
        assert_eq!(created["kind"], "Lease");
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
