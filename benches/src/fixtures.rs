//! Realistic objects, built from the kube-apiserver JSON in the filters' fixtures: an
//! EndpointSlice of about 2 KB (the fixture itself) or 20 KB (more endpoints), and Services
//! of about 2 KB or 20 KB (more ports and a `last-applied-configuration` annotation, as
//! `kubectl apply` leaves them).

use bytes::Bytes;
use serde_json::{Value, json};

/// How many endpoints make an EndpointSlice of about 20 KB.
pub const ENDPOINTS_20K: usize = 66;

const SLICES: &str = include_str!("../../filters/servicetopology/fixtures/endpointslices.v1.json");
const SERVICES: &str = include_str!("../../filters/masterservice/fixtures/services.json");

/// The node the gateway serves in every benchmark.
pub const NODE: &str = "edge-1";
/// A Service whose `openyurt.io/topologyKeys` keeps only this node's endpoints.
pub const NODE_LOCAL_SERVICE: &str = "web-node";
/// A Service without a topology: servicetopology keeps its slices as they are.
pub const PLAIN_SERVICE: &str = "web-plain";

/// The first item of a fixture list.
fn first_item(list: &str) -> Value {
    let list: Value = serde_json::from_str(list).unwrap_or(Value::Null);
    list["items"][0].clone()
}

/// An EndpointSlice of `service` in `default` with `endpoints` endpoints spread over four
/// nodes (a quarter on [`NODE`]). Five endpoints make the 2 KB fixture, [`ENDPOINTS_20K`] about
/// 20 KB.
pub fn endpoint_slice(name: &str, service: &str, endpoints: usize) -> Value {
    let mut slice = first_item(SLICES);
    slice["metadata"]["name"] = json!(name);
    slice["metadata"]["labels"]["kubernetes.io/service-name"] = json!(service);
    slice["metadata"]["ownerReferences"][0]["name"] = json!(service);
    let template = slice["endpoints"][0].clone();
    let list: Vec<Value> = (0..endpoints)
        .map(|i| {
            let mut endpoint = template.clone();
            endpoint["addresses"] = json!([format!("10.244.{}.{}", i % 4 + 1, i / 4 + 2)]);
            endpoint["nodeName"] = json!(format!("edge-{}", i % 4 + 1));
            endpoint["targetRef"]["name"] = json!(format!("{service}-6b7d9c5f4-{i:05}"));
            endpoint["targetRef"]["uid"] = json!(format!("9a0c1d2e-0000-4000-8000-{i:012}"));
            endpoint
        })
        .collect();
    slice["endpoints"] = Value::Array(list);
    slice
}

const SLICES_V1BETA1: &str =
    include_str!("../../filters/servicetopology/fixtures/endpointslices.v1beta1.json");

/// A `discovery.k8s.io/v1beta1` EndpointSlice (what kube-apiserver 1.20 serves) of `service`
/// in `namespace`, ready to create: five endpoints over four nodes, two on [`NODE`], and no
/// server-set fields.
pub fn endpoint_slice_v1beta1(namespace: &str, name: &str, service: &str) -> Value {
    let mut slice = first_item(SLICES_V1BETA1);
    let template = slice["endpoints"][0].clone();
    slice["metadata"] = json!({
        "name": name,
        "namespace": namespace,
        "labels": {
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            "kubernetes.io/service-name": service,
        },
        "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2021-03-02T08:12:03Z"},
    });
    let endpoints: Vec<Value> = (0..5)
        .map(|i| {
            let mut endpoint = template.clone();
            let node = if i % 2 == 0 {
                NODE.to_owned()
            } else {
                format!("edge-{}", i + 1)
            };
            endpoint["addresses"] = json!([format!("10.244.{}.{}", i + 1, i + 2)]);
            endpoint["topology"]["kubernetes.io/hostname"] = json!(node);
            endpoint["targetRef"]["namespace"] = json!(namespace);
            endpoint["targetRef"]["name"] = json!(format!("{service}-6b7d9c5f4-{i:05}"));
            endpoint
        })
        .collect();
    slice["endpoints"] = Value::Array(endpoints);
    slice["apiVersion"] = json!("discovery.k8s.io/v1beta1");
    slice["kind"] = json!("EndpointSlice");
    slice
}

/// What kind of Service to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceKind {
    /// A ClusterIP Service.
    ClusterIp,
    /// A LoadBalancer annotated `svc.openyurt.io/discard: "true"`.
    DiscardedLoadBalancer,
}

/// A Service `namespace/name` of at least `size` bytes of JSON: ports are added (with their
/// managed fields and a `last-applied-configuration` annotation) until it is that large.
pub fn service(namespace: &str, name: &str, kind: ServiceKind, size: usize) -> Value {
    let mut ports = 1;
    loop {
        let service = service_with_ports(namespace, name, kind, ports);
        if service.to_string().len() >= size {
            return service;
        }
        ports += 1;
    }
}

fn service_with_ports(namespace: &str, name: &str, kind: ServiceKind, ports: usize) -> Value {
    let mut service = first_item(SERVICES);
    service["metadata"]["namespace"] = json!(namespace);
    service["metadata"]["name"] = json!(name);
    let port = |i: usize| {
        let name = if i == 0 {
            "https".to_owned()
        } else {
            format!("metrics-{i}")
        };
        json!({"name": name, "protocol": "TCP", "port": 443 + i, "targetPort": 6443 + i})
    };
    service["spec"]["ports"] = Value::Array((0..ports).map(port).collect());
    if kind == ServiceKind::DiscardedLoadBalancer {
        service["spec"]["type"] = json!("LoadBalancer");
        service["metadata"]["annotations"] = json!({"svc.openyurt.io/discard": "true"});
    }
    let fields: serde_json::Map<String, Value> = (0..ports)
        .map(|i| {
            (
                format!("k:{{\"port\":{},\"protocol\":\"TCP\"}}", 443 + i),
                json!({".": {}, "f:name": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}}),
            )
        })
        .collect();
    service["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:ports"] =
        Value::Object(fields);
    if ports > 1 {
        let applied = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": service["spec"].clone(),
        });
        service["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
            json!(applied.to_string());
    }
    service
}

/// A Service the gateway's lookups hold for servicetopology: `name` in `default`, with its
/// topology annotation if `topology` is given.
pub fn topology_service(name: &str, topology: Option<&str>) -> Value {
    let mut service = first_item(SERVICES);
    service["metadata"]["namespace"] = json!("default");
    service["metadata"]["name"] = json!(name);
    if let Some(key) = topology {
        service["metadata"]["annotations"] = json!({"openyurt.io/topologyKeys": key});
    }
    service
}

/// A minimal Service to create in a namespace of kube-apiserver for servicetopology to look
/// up, with its topology annotation if `topology` is given.
pub fn service_to_create(namespace: &str, name: &str, topology: Option<&str>) -> Value {
    let annotations = match topology {
        Some(key) => json!({"openyurt.io/topologyKeys": key}),
        None => json!({}),
    };
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    })
}

/// The Services servicetopology looks up in every benchmark.
pub fn looked_up_services() -> Vec<Value> {
    vec![
        topology_service(NODE_LOCAL_SERVICE, Some("kubernetes.io/hostname")),
        topology_service(PLAIN_SERVICE, None),
    ]
}

/// The fields kube-apiserver writes first, in the order the Go types declare them.
const LEADING_FIELDS: [&str; 3] = ["kind", "apiVersion", "metadata"];

/// The fields of `metadata` in the order Go's `ObjectMeta` declares them, which
/// kube-apiserver writes: the name first, `managedFields` last.
const METADATA_FIELDS: [&str; 16] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "clusterName",
    "managedFields",
];

/// An object as the bytes kube-apiserver sends: `kind`, `apiVersion` and `metadata` first,
/// then the other top-level fields, which for the objects here sort as Go declares them
/// (`addressType`, `endpoints`, `ports`; `spec`, `status`); `metadata`'s own fields as
/// `ObjectMeta` declares them. Within the other values keys are sorted.
pub fn bytes_of(object: &Value) -> Bytes {
    let mut out = Vec::new();
    write_ordered(&mut out, object, &LEADING_FIELDS);
    Bytes::from(out)
}

/// Writes `value` with the object's `leading` keys first, in that order, and `metadata`'s
/// in [`METADATA_FIELDS`]'s.
fn write_ordered(out: &mut Vec<u8>, value: &Value, leading: &[&str]) {
    let Value::Object(fields) = value else {
        serde_json::to_writer(&mut *out, value).expect("a JSON value encodes");
        return;
    };
    let first = leading.iter().filter_map(|key| fields.get_key_value(*key));
    let others = fields
        .iter()
        .filter(|(key, _)| !leading.contains(&key.as_str()));
    out.push(b'{');
    for (index, (key, value)) in first.chain(others).enumerate() {
        if index > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key).expect("a string encodes");
        out.push(b':');
        if key == "metadata" {
            write_ordered(out, value, &METADATA_FIELDS);
        } else {
            serde_json::to_writer(&mut *out, value).expect("a JSON value encodes");
        }
    }
    out.push(b'}');
}

/// A list body as kube-apiserver writes it: kind, apiVersion, metadata, then the items.
pub fn list_body<'a>(
    kind: &str,
    api_version: &str,
    items: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<u8> {
    let mut body = format!(
        r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{"resourceVersion":"4242"}},"items":["#
    )
    .into_bytes();
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item);
    }
    body.extend_from_slice(b"]}\n");
    body
}

/// A watch body: one `{"type":"MODIFIED","object":…}` line per object.
pub fn watch_body<'a>(objects: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = Vec::new();
    for object in objects {
        body.extend_from_slice(br#"{"type":"MODIFIED","object":"#);
        body.extend_from_slice(object);
        body.extend_from_slice(b"}\n");
    }
    body
}

/// `count` EndpointSlices of about 2 KB, alternately of [`NODE_LOCAL_SERVICE`] and
/// [`PLAIN_SERVICE`] (so servicetopology rewrites half and keeps half), as bytes.
pub fn slices(count: usize) -> Vec<Bytes> {
    (0..count)
        .map(|i| {
            let service = if i % 2 == 0 {
                NODE_LOCAL_SERVICE
            } else {
                PLAIN_SERVICE
            };
            let mut slice = endpoint_slice(&format!("{service}-{i:06}"), service, 5);
            slice["metadata"]["resourceVersion"] = json!((100_000 + i).to_string());
            bytes_of(&slice)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_have_the_sizes_the_benchmarks_claim() {
        let small = bytes_of(&endpoint_slice("s", NODE_LOCAL_SERVICE, 5)).len();
        let large = bytes_of(&endpoint_slice("s", NODE_LOCAL_SERVICE, ENDPOINTS_20K)).len();
        assert!((1_800..3_000).contains(&small), "{small}");
        assert!((18_000..24_000).contains(&large), "{large}");
        for size in [2_000, 20_000] {
            let len = bytes_of(&service("a", "b", ServiceKind::ClusterIp, size)).len();
            assert!((size..size + 1_500).contains(&len), "{len}");
        }
        let slice = bytes_of(&endpoint_slice("s", NODE_LOCAL_SERVICE, 5));
        let keys: Vec<String> = serde_json::from_slice::<Value>(&slice)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let at = |key: &str| {
            let needle = format!("\"{key}\":");
            slice
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
        };
        let mut order: Vec<&str> = keys.iter().map(String::as_str).collect();
        order.sort_by_key(|key| at(key));
        assert_eq!(
            order,
            ["metadata", "addressType", "endpoints", "ports"],
            "a list's item, as the fixture is: no kind or apiVersion"
        );
        let metadata = [
            "name",
            "namespace",
            "resourceVersion",
            "labels",
            "managedFields",
        ];
        let at_metadata: Vec<_> = metadata.iter().map(|key| at(key)).collect();
        assert!(
            at_metadata.iter().all(Option::is_some) && at_metadata.is_sorted(),
            "metadata as ObjectMeta declares it: {at_metadata:?}"
        );
        let list = list_body("L", "v1", slices(3).iter().map(|b| &b[..]));
        let parsed: Value = serde_json::from_slice(&list).unwrap();
        assert_eq!(parsed["items"].as_array().map(Vec::len), Some(3));
    }
}
