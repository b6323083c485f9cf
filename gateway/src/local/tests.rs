//! kubelet's node lease, answered by the gateway; offline reads of subresources.

use crate::cache::StoreWriter;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::Local;
use crate::cache::{Cache, CacheMetrics, CachePolicy, RedbStore, WriteOp};
use crate::request::{RequestContext, RequestInfo};
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
        min_request_timeout: Duration::from_secs(1800),
        filters: None,
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
    assert_eq!(
        answered(local.kubelet_lease(&renew, broken).await).status(),
        400
    );
    assert!(!local.kubelet.alive(), "a refused body is no renewal");

    let lease = Bytes::from_static(
        br#"{"kind":"Lease","metadata":{"name":"edge-1","resourceVersion":"7"}}"#,
    );
    let request = Request::builder()
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(lease.clone()))
        .unwrap();
    let response = answered(local.kubelet_lease(&renew, request).await);
    assert_eq!(response.status(), 200);
    let body = BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(
        body, lease,
        "the lease comes back as sent: no conflict can arise"
    );
    assert!(local.kubelet.alive());
}

/// A local proxy over a store holding kubelet's pod `default/web`.
fn local_with_a_pod() -> (tempfile::TempDir, Local) {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let pod = json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"}});
    let upsert = WriteOp::Upsert {
        key: "kubelet/pods.v1.core/default/web".into(),
        object: Bytes::from(pod.to_string()),
        resource_version: "7".into(),
    };
    store.apply(&[upsert], true).unwrap();
    let cache = Cache::start(
        Arc::new(store),
        CachePolicy::new(&["kubelet".to_owned()]),
        CacheMetrics::default(),
    );
    let (_, health) = tokio::sync::watch::channel(false);
    (
        dir,
        Local {
            cache,
            health,
            node_name: None,
            kubelet: Arc::default(),
            min_request_timeout: Duration::from_secs(1800),
            filters: None,
        },
    )
}

/// The response the client gets: a refusal as the server maps it.
fn answered(
    result: Result<http::Response<crate::reply::ResponseBody>, super::LocalError>,
) -> http::Response<crate::reply::ResponseBody> {
    result
        .unwrap_or_else(|refusal| crate::refusal::refuse(&refusal, &crate::metrics::Metrics::new()))
}

/// kubelet's GET of `target`.
fn kubelet(target: &str) -> RequestContext {
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::USER_AGENT, "kubelet/v1.20".parse().unwrap());
    RequestContext::parse(&Method::GET, &target.parse().unwrap(), &headers)
}

async fn get(local: &Local, path: &str) -> (StatusCode, Value) {
    let response = answered(local.read(&kubelet(path)).await);
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn an_offline_get_of_a_subresource_is_never_answered_with_its_parent() {
    let (_dir, local) = local_with_a_pod();
    let (code, pod) = get(&local, "/api/v1/namespaces/default/pods/web").await;
    assert_eq!((code, &pod["kind"]), (StatusCode::OK, &json!("Pod")));
    // `status` is the object itself.
    let (code, status) = get(&local, "/api/v1/namespaces/default/pods/web/status").await;
    assert_eq!((code, status), (StatusCode::OK, pod));
    for subresource in ["log", "ephemeralcontainers", "eviction"] {
        let path = format!("/api/v1/namespaces/default/pods/web/{subresource}");
        let (code, status) = get(&local, &path).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{subresource}");
        assert_eq!(status["kind"], "Status", "{subresource}");
        assert_eq!(status["reason"], "ServiceUnavailable", "{subresource}");
        let message = status["message"].as_str().unwrap();
        assert!(
            message.contains(subresource) && message.contains("cannot be answered offline"),
            "{message}"
        );
    }
    // Found by fuzzing (fuzz/ request_info): a path with an empty name reads, as
    // kube-apiserver derives it, as a list or watch with a subresource, which the
    // apiserver does not serve; the cached list must not stand in for it.
    for path in [
        "/api/v1/namespaces/default/pods//log",
        "/api/v1/namespaces/default/pods//status?watch=1",
    ] {
        let (code, status) = get(&local, path).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{path}");
        assert_eq!(status["reason"], "ServiceUnavailable", "{path}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_offline_watch_without_timeout_ends_within_one_to_two_min_request_timeouts() {
    let (_dir, mut local) = local_with_a_pod();
    local.min_request_timeout = Duration::from_secs(100);
    let (_cloud_down, health) = tokio::sync::watch::channel(false);
    local.health = health;
    let response = answered(local.read(&kubelet("/api/v1/pods?watch=true")).await);
    assert_eq!(response.status(), StatusCode::OK);
    // From the answer on: while the read waited on the cache writer's thread, the paused
    // clock may have jumped ahead (up to the 5 s bound of `caught_up`) before the watch's
    // deadline was set.
    let start = tokio::time::Instant::now();
    // The paused clock jumps to the watch's end once nothing else is left to run.
    response.into_body().collect().await.unwrap();
    let lasted = start.elapsed();
    assert!(
        (Duration::from_secs(100)..=Duration::from_secs(200)).contains(&lasted),
        "{lasted:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_answered_before_the_health_checks_turned_ends_after_a_second_not_at_once() {
    let (_dir, mut local) = local_with_a_pod();
    let (_cloud_up, health) = tokio::sync::watch::channel(true);
    local.health = health;
    let response = answered(local.read(&kubelet("/api/v1/pods?watch=true")).await);
    let start = tokio::time::Instant::now();
    response.into_body().collect().await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(1),
        "no busy loop of watches"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_answered_before_the_health_checks_turned_lasts_once_they_do() {
    let (_dir, mut local) = local_with_a_pod();
    let (cloud, health) = tokio::sync::watch::channel(true);
    local.health = health;
    local.min_request_timeout = Duration::from_secs(100);
    let response = answered(local.read(&kubelet("/api/v1/pods?watch=true")).await);
    let start = tokio::time::Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cloud.send_replace(false);
        tokio::time::sleep(Duration::from_secs(10)).await;
        cloud.send_replace(true);
    });
    response.into_body().collect().await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(10_500),
        "until the cloud is back"
    );
}
