//! A watch resuming a set the node wrote in while cut lists again, once.

use crate::cache::StoreWriter;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use crate::cache::{
    Cache, CacheMetrics, CachePolicy, RedbStore, ResourceKey, SetKey, SetMeta, Store, WriteOp,
};
use crate::local::Local;
use crate::request::RequestContext;
use crate::upstream::KubeletLease;

const NODE: &str = "edge-1";
const PODS: &str = "/api/v1/pods?fieldSelector=spec.nodeName%3Dedge-1";

fn pods_set(component: &str) -> SetKey {
    let resource = ResourceKey {
        component: component.to_owned(),
        resource: "pods".to_owned(),
        version: "v1".to_owned(),
        group: String::new(),
    };
    SetKey::new(resource, "", "", &format!("spec.nodeName={NODE}"))
}

/// The ops that commit list `list` of `component`'s pods on this node at `version`,
/// holding the pod `default/web`.
fn listed(component: &str, list: u64, version: &str) -> Vec<WriteOp> {
    let pod = json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7",
            "uid": "u-1"},
        "spec": {"nodeName": NODE}, "status": {"podIP": "10.0.0.5"}});
    vec![
        WriteOp::Stage {
            list,
            key: format!("{component}/pods.v1.core/default/web"),
            object: Bytes::from(pod.to_string()),
        },
        WriteOp::Commit {
            list,
            set: pods_set(component),
            meta: SetMeta {
                resource_version: version.to_owned(),
                list_kind: "PodList".to_owned(),
                api_version: "v1".to_owned(),
                items: 1,
                ..SetMeta::default()
            },
        },
    ]
}

/// kubelet's and kube-proxy's pods of this node, listed at 10; the cloud last seen at 100.
fn local() -> (tempfile::TempDir, Local, Arc<RedbStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    store.apply(&listed("kubelet", 1, "10"), true).unwrap();
    store.apply(&listed("kube-proxy", 2, "10"), true).unwrap();
    // The tests write as the cloud's responses do, beside the cache's writer.
    let store = Arc::new(store);
    let cache = Cache::start(
        store.clone(),
        CachePolicy::new(&["*".to_owned()]),
        CacheMetrics::default(),
    );
    cache.saw_cloud_version(100);
    let (_, health) = tokio::sync::watch::channel(true);
    let local = Local {
        cache,
        health,
        node_name: Some(NODE.to_owned()),
        kubelet: Arc::new(KubeletLease::default()),
        min_request_timeout: Duration::from_secs(1800),
        filters: None,
    };
    (dir, local, store)
}

fn request(component: &str, method: Method, target: &str) -> RequestContext {
    let mut headers = http::HeaderMap::new();
    let agent = format!("{component}/v1.20");
    headers.insert(http::header::USER_AGENT, agent.parse().unwrap());
    RequestContext::parse(&method, &target.parse().unwrap(), &headers)
}

/// kubelet's offline status patch of its pod: a new address.
async fn patch_status(local: &Local) {
    let context = request(
        "kubelet",
        Method::PATCH,
        "/api/v1/namespaces/default/pods/web/status",
    );
    let body = json!({"metadata": {"uid": "u-1"}, "status": {"podIP": "10.0.0.9"}});
    let patch = Request::builder()
        .header(
            http::header::CONTENT_TYPE,
            "application/strategic-merge-patch+json",
        )
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let answer = local.write_own(&context, patch).await.unwrap();
    assert!(answer.is_ok(), "the pod is the node's own");
}

/// What the watch `target` of `component` is answered with here: the event, or `None`
/// when it goes to the cloud.
async fn watch(local: &Local, component: &str, target: &str) -> Option<Value> {
    let context = request(component, Method::GET, target);
    let response = local.relist_after_own_writes(&context).await?;
    assert_eq!(
        response.status(),
        200,
        "as kube-apiserver: the error is an event"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Some(serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn the_writer_s_resumed_watch_lists_again_until_a_list_commits() {
    let (_dir, local, store) = local();
    let resumed = format!("{PODS}&watch=true&resourceVersion=10");
    assert_eq!(
        watch(&local, "kubelet", &resumed).await,
        None,
        "nothing written"
    );

    patch_status(&local).await;
    let event = watch(&local, "kubelet", &resumed).await.expect("a 410");
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");
    // From the write's own version, as after an offline watch sent it: the same.
    let written = local
        .cache
        .own_writes_from(&pods_set("kubelet"))
        .expect("marked");
    let after = format!("{PODS}&watch=true&resourceVersion={written}");
    assert!(watch(&local, "kubelet", &after).await.is_some());
    assert_eq!(local.cache.metrics().own_write_relists.get(), 2);

    // A watch that lists as it starts, a list, another component's watch (its copy follows
    // the cloud's next version of the pod) and another set go to the cloud.
    for (component, target) in [
        ("kubelet", format!("{PODS}&watch=true")),
        ("kubelet", format!("{PODS}&watch=true&resourceVersion=0")),
        ("kubelet", format!("{PODS}&resourceVersion=10")),
        ("kube-proxy", resumed.clone()),
        (
            "kubelet",
            "/api/v1/pods?watch=true&resourceVersion=10".to_owned(),
        ),
    ] {
        assert_eq!(
            watch(&local, component, &target).await,
            None,
            "{component} {target}"
        );
    }

    // The writer's list from the cloud commits: its watches resume from the cloud again.
    store.apply(&listed("kubelet", 3, "120"), true).unwrap();
    let relisted = format!("{PODS}&watch=true&resourceVersion=120");
    assert_eq!(watch(&local, "kubelet", &relisted).await, None);
}

#[test]
fn the_lowest_own_write_is_kept_and_an_unlisted_set_is_not_marked() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    store.apply(&listed("kubelet", 1, "10"), true).unwrap();
    let mark = |set: SetKey, version: &str| WriteOp::OwnWrite {
        set,
        resource_version: version.to_owned(),
    };
    store
        .apply(&[mark(pods_set("kubelet"), "12")], true)
        .unwrap();
    store
        .apply(&[mark(pods_set("kubelet"), "11")], true)
        .unwrap();
    store
        .apply(&[mark(pods_set("kubelet"), "15")], true)
        .unwrap();
    store
        .apply(&[mark(pods_set("coredns"), "15")], true)
        .unwrap();
    let sets = store.sets("").unwrap();
    assert_eq!(sets.len(), 1, "no set made for coredns: {sets:?}");
    assert_eq!(sets[0].1.own_writes_from, "11");
    // A watch's sync keeps the mark; a list's commit clears it.
    let synced = WriteOp::Synced {
        set: pods_set("kubelet"),
        resource_version: "20".to_owned(),
    };
    store.apply(&[synced], true).unwrap();
    let sets = store.sets("").unwrap();
    assert_eq!(
        (
            sets[0].1.resource_version.as_str(),
            sets[0].1.own_writes_from.as_str()
        ),
        ("20", "11")
    );
    store.apply(&listed("kubelet", 2, "30"), true).unwrap();
    assert_eq!(store.sets("").unwrap()[0].1.own_writes_from, "");
}

#[tokio::test]
async fn a_list_from_a_local_version_asks_the_cloud_from_the_resource_s_cloud_version() {
    let (_dir, local, _) = local();
    let asks =
        |target: &str| local.cloud_version_for_list(&request("kubelet", Method::GET, target));
    assert_eq!(
        asks(&format!("{PODS}&resourceVersion=11")),
        None,
        "no local write yet"
    );
    patch_status(&local).await;
    let written = local.cache.last_local_version();
    assert_eq!(written, 11, "one past the sets' 10");
    assert_eq!(asks(&format!("{PODS}&resourceVersion={written}")), Some(10));
    assert_eq!(
        asks(&format!("/api/v1/pods?resourceVersion={written}")),
        Some(10),
        "whichever set it lists"
    );
    for target in [
        format!("{PODS}&resourceVersion=10"),
        format!("{PODS}&resourceVersion=0"),
        PODS.to_owned(),
        // Past every local version: the cloud's, not ours.
        format!("{PODS}&resourceVersion=50"),
        format!("{PODS}&resourceVersion={written}&resourceVersionMatch=Exact"),
        format!("{PODS}&resourceVersion={written}&watch=true"),
    ] {
        assert_eq!(asks(&target), None, "{target}");
    }
}
