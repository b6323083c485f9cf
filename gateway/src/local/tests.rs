//! kubelet's node lease, answered by the gateway.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::Full;

use super::Local;
use crate::cache::{Cache, CacheMetrics, CachePolicy, RedbStore};
use crate::request::RequestInfo;
use crate::upstream::KubeletLease;

fn local(dir: &tempfile::TempDir, node_name: Option<&str>) -> Local {
    let store = Arc::new(RedbStore::open(dir.path()).unwrap());
    let cache = Cache::start(
        store,
        CachePolicy::new(&["*".to_owned()]),
        CacheMetrics::default(),
    );
    let (_, health) = tokio::sync::watch::channel(true);
    Local {
        cache,
        health,
        node_name: node_name.map(str::to_owned),
        kubelet: Arc::new(KubeletLease::default()),
    }
}

fn info(method: Method, path: &str) -> RequestInfo {
    RequestInfo::parse(&method, path, None)
}

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

#[test]
fn only_kubelet_s_writes_of_this_node_s_lease_are_answered_locally() {
    let dir = tempfile::tempdir().unwrap();
    let local = local(&dir, Some("edge-1"));
    let renew = info(Method::PUT, &format!("{LEASES}/edge-1"));
    let create = info(Method::POST, LEASES);
    assert!(local.answers_kubelet_lease(&renew, "kubelet"));
    assert!(local.answers_kubelet_lease(&create, "kubelet"));
    for (info, component) in [
        (renew.clone(), "kube-proxy"),
        (info(Method::PUT, &format!("{LEASES}/edge-2")), "kubelet"),
        (info(Method::GET, &format!("{LEASES}/edge-1")), "kubelet"),
        (info(Method::DELETE, &format!("{LEASES}/edge-1")), "kubelet"),
        (
            info(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/edge-1",
            ),
            "kubelet",
        ),
        (info(Method::PUT, "/api/v1/nodes/edge-1"), "kubelet"),
    ] {
        assert!(
            !local.answers_kubelet_lease(&info, component),
            "{component} {:?} {}/{}",
            info.verb,
            info.namespace,
            info.name
        );
    }
    let other_dir = tempfile::tempdir().unwrap();
    let without_node = self::local(&other_dir, None);
    assert!(
        !without_node.answers_kubelet_lease(&renew, "kubelet"),
        "without --node-name there is no heartbeat to be the lease"
    );
}

#[tokio::test]
async fn a_renewal_is_echoed_and_noted_for_the_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let local = local(&dir, Some("edge-1"));
    let renew = info(Method::PUT, &format!("{LEASES}/edge-1"));
    assert!(!local.kubelet.alive());

    let broken = Request::builder()
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from_static(b"{")))
        .unwrap();
    assert_eq!(local.kubelet_lease(&renew, broken).await.status(), 400);
    assert!(!local.kubelet.alive(), "a refused body is no renewal");

    let lease = Bytes::from_static(
        br#"{"kind":"Lease","metadata":{"name":"edge-1","resourceVersion":"7"}}"#,
    );
    let request = Request::builder()
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(lease.clone()))
        .unwrap();
    let response = local.kubelet_lease(&renew, request).await;
    assert_eq!(response.status(), 200);
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(
        body, lease,
        "the lease comes back as sent: no conflict can arise"
    );
    assert!(local.kubelet.alive());
}
