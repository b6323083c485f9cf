//! The local layer's bound and gauges, and the filters its changed copies pass again.

use crate::cache::StoreWriter;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::Full;
use serde_json::{Value, json};

use crate::cache::{
    Cache, CacheMetrics, CachePolicy, LocalLayer, RedbStore, ResourceKey, SetKey, SetMeta, WriteOp,
};
use crate::local::{Local, LocalError, LocalFilters};
use crate::request::{RequestContext, RequestInfo};
use crate::stream::{Transform, TransformError, Verdict};
use crate::upstream::KubeletLease;

const NODE: &str = "edge-1";

fn resource(component: &str, group: &str, version: &str, resource: &str) -> ResourceKey {
    ResourceKey {
        component: component.to_owned(),
        resource: resource.to_owned(),
        version: version.to_owned(),
        group: group.to_owned(),
    }
}

fn pods(component: &str) -> ResourceKey {
    resource(component, "", "v1", "pods")
}

fn slices(component: &str) -> ResourceKey {
    resource(component, "discovery.k8s.io", "v1", "endpointslices")
}

/// The ops that commit list `list` of `resource` at version 10, holding `object`, and note
/// its component as served (the cache knows its components so).
fn listed(list: u64, resource: ResourceKey, object: &Value) -> Vec<WriteOp> {
    let name = object["metadata"]["name"].as_str().unwrap();
    vec![
        WriteOp::Touch {
            component: resource.component.clone(),
            at: 0,
        },
        WriteOp::Stage {
            list,
            key: resource.object_key("default", name),
            object: Bytes::from(object.to_string()),
        },
        WriteOp::Commit {
            list,
            set: SetKey::new(resource, "", "", ""),
            meta: SetMeta {
                resource_version: "10".to_owned(),
                items: 1,
                ..SetMeta::default()
            },
        },
    ]
}

fn pod() -> Value {
    json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7", "uid": "u-1"},
        "spec": {"nodeName": NODE},
        "status": {"podIP": "10.0.0.5", "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn slice() -> Value {
    json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"name": "web-abc", "namespace": "default", "resourceVersion": "8"},
        "endpoints": [{"addresses": ["10.0.0.5"], "conditions": {"ready": true},
            "targetRef": {"kind": "Pod", "namespace": "default", "name": "web"}}]})
}

/// kubelet's and kube-proxy's copies of the pod, kube-proxy's and CoreDNS's of its
/// EndpointSlice, each listed at 10; the cloud last seen at 100.
fn local(filters: Option<Arc<dyn LocalFilters>>) -> (tempfile::TempDir, Local, Arc<RedbStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    store
        .apply(&listed(1, pods("kubelet"), &pod()), true)
        .unwrap();
    store
        .apply(&listed(2, pods("kube-proxy"), &pod()), true)
        .unwrap();
    store
        .apply(&listed(3, slices("kube-proxy"), &slice()), true)
        .unwrap();
    store
        .apply(&listed(4, slices("coredns"), &slice()), true)
        .unwrap();
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
        filters,
    };
    (dir, local, store)
}

/// kubelet's offline status patch of its pod: `status` merged in.
async fn patch_status(local: &Local, status: Value) -> Result<(), LocalError> {
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::USER_AGENT, "kubelet/v1.20".parse().unwrap());
    let target = "/api/v1/namespaces/default/pods/web/status";
    let context = RequestContext::parse(&Method::PATCH, &target.parse().unwrap(), &headers);
    let body = json!({"metadata": {"uid": "u-1"}, "status": status});
    let patch = Request::builder()
        .header(
            http::header::CONTENT_TYPE,
            "application/strategic-merge-patch+json",
        )
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let answer = local.write_own(&context, patch).await?;
    assert!(answer.is_ok(), "the pod is the node's own");
    Ok(())
}

fn stored(local: &Local, key: &str) -> Option<Value> {
    let bytes = local.cache.store().get(key).unwrap()?;
    Some(serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn the_layer_is_counted_in_its_gauges_and_bounded() {
    let (_dir, local, store) = local(None);
    let cache = &local.cache;
    assert_eq!(cache.local_layer().unwrap(), LocalLayer::default());
    let kubelet_pod = pods("kubelet").object_key("default", "web");

    cache.set_local_limit(10);
    let refused = patch_status(&local, json!({"podIP": "10.0.0.9"})).await;
    assert!(
        matches!(refused, Err(LocalError::Full(_))),
        "past the bound: {refused:?}"
    );
    assert_eq!(
        stored(&local, &kubelet_pod).unwrap()["status"]["podIP"],
        "10.0.0.5",
        "a refused write changes nothing"
    );
    assert_eq!(cache.local_layer().unwrap(), LocalLayer::default());

    cache.set_local_limit(u64::MAX);
    patch_status(&local, json!({"podIP": "10.0.0.9"}))
        .await
        .unwrap();
    let layer = cache.local_layer().unwrap();
    assert_eq!(
        layer.objects, 4,
        "kubelet's and kube-proxy's pods, kube-proxy's and CoreDNS's slices: {layer:?}"
    );
    let metrics = cache.metrics();
    assert_eq!(metrics.local_objects.get(), 4);
    assert_eq!(
        metrics.local_bytes.get(),
        i64::try_from(layer.bytes).unwrap()
    );

    // At the bound, a write that does not grow the layer is taken; one that does is not.
    cache.set_local_limit(layer.bytes);
    patch_status(&local, json!({"podIP": "10.0.0.8"}))
        .await
        .unwrap();
    assert_eq!(cache.local_layer().unwrap(), layer, "the same sizes");
    let grows = json!({"podIP": "10.0.0.8", "message": "a message the layer has no room for"});
    assert!(matches!(
        patch_status(&local, grows).await,
        Err(LocalError::Full(_))
    ));

    // The cloud's newer pod replaces kubelet's copy: it leaves the layer.
    let mut cloud = pod();
    cloud["metadata"]["resourceVersion"] = "150".into();
    store
        .apply(
            &[WriteOp::Upsert {
                key: kubelet_pod,
                object: Bytes::from(cloud.to_string()),
                resource_version: "150".to_owned(),
            }],
            true,
        )
        .unwrap();
    assert_eq!(cache.local_layer().unwrap().objects, 3);
    assert_eq!(metrics.local_objects.get(), 3);
}

/// Filters by component: kube-proxy's slices tagged, CoreDNS's slices left out.
struct Tagging;

impl LocalFilters for Tagging {
    fn session(&self, info: &RequestInfo, component: &str) -> Option<Box<dyn Transform>> {
        assert_eq!(
            info.verb.as_str(),
            "watch",
            "a change is filtered as a watch event"
        );
        match (component, info.resource.as_str()) {
            ("kube-proxy", "endpointslices") => Some(Box::new(Tag)),
            ("coredns", "endpointslices") => Some(Box::new(Leave)),
            _ => None,
        }
    }
}

struct Tag;

impl Transform for Tag {
    fn apply(&mut self, object: &Bytes) -> Result<Verdict, TransformError> {
        let mut object: Value = serde_json::from_slice(object).unwrap();
        object["metadata"]["annotations"] = json!({"filtered": "yes"});
        Ok(Verdict::Replace(Bytes::from(object.to_string())))
    }
}

struct Leave;

impl Transform for Leave {
    fn apply(&mut self, _: &Bytes) -> Result<Verdict, TransformError> {
        Ok(Verdict::Drop)
    }
}

#[tokio::test]
async fn a_changed_copy_passes_its_component_s_filters_as_a_cloud_event() {
    let (_dir, local, _) = local(Some(Arc::new(Tagging)));
    let mut changes = local.cache.local_changes();
    patch_status(&local, json!({"podIP": "10.0.0.9"}))
        .await
        .unwrap();

    let proxy_slice = stored(
        &local,
        &slices("kube-proxy").object_key("default", "web-abc"),
    )
    .expect("kube-proxy's slice");
    assert_eq!(
        proxy_slice["endpoints"][0]["addresses"],
        json!(["10.0.0.9"])
    );
    assert_eq!(
        proxy_slice["metadata"]["annotations"]["filtered"], "yes",
        "kube-proxy's filters ran on the followed slice"
    );
    assert_eq!(
        stored(&local, &slices("coredns").object_key("default", "web-abc")),
        None,
        "a copy CoreDNS's filters leave out leaves its set"
    );
    let kubelet_pod = stored(&local, &pods("kubelet").object_key("default", "web")).unwrap();
    assert_eq!(kubelet_pod["status"]["podIP"], "10.0.0.9");
    assert!(
        kubelet_pod["metadata"]["annotations"].is_null(),
        "no filter applies to kubelet's pods"
    );

    let mut events = Vec::new();
    while let Ok(change) = changes.try_recv() {
        events.push((
            change.resource.component.clone(),
            change.resource.resource.clone(),
            change.event.kind.as_str(),
        ));
    }
    events.sort();
    assert_eq!(
        events,
        [
            ("coredns".to_owned(), "endpointslices".to_owned(), "DELETED"),
            (
                "kube-proxy".to_owned(),
                "endpointslices".to_owned(),
                "MODIFIED"
            ),
            ("kube-proxy".to_owned(), "pods".to_owned(), "MODIFIED"),
            ("kubelet".to_owned(), "pods".to_owned(), "MODIFIED"),
        ]
    );
}
