use prost_reflect::prost::Message as _;
use prost_reflect::{DynamicMessage, Value};
use serde_json::json;

use super::*;

fn pool() -> &'static DescriptorPool {
    POOL.as_ref().expect("the descriptor set decodes")
}

/// A message of `name` with `fields` (name, value) set.
fn message(name: &str, fields: Vec<(&str, Value)>) -> DynamicMessage {
    let descriptor = pool()
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("{name} is described"));
    let mut message = DynamicMessage::new(descriptor);
    for (field, value) in fields {
        message
            .try_set_field_by_name(field, value)
            .unwrap_or_else(|error| panic!("{name}.{field}: {error}"));
    }
    message
}

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";
const CORE: &str = "k8s.io.api.core.v1.";

fn text(value: &str) -> Value {
    Value::String(value.to_owned())
}

fn time(seconds: i64) -> Value {
    Value::Message(message(
        &format!("{META}Time"),
        vec![("seconds", Value::I64(seconds))],
    ))
}

/// `raw` in its envelope, as kube-apiserver and client-go send it.
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = message(
        "k8s.io.apimachinery.pkg.runtime.Unknown",
        vec![
            (
                "typeMeta",
                Value::Message(message(
                    "k8s.io.apimachinery.pkg.runtime.TypeMeta",
                    vec![("apiVersion", text(api_version)), ("kind", text(kind))],
                )),
            ),
            ("raw", Value::Bytes(raw.into())),
            ("contentEncoding", text("")),
            ("contentType", text("")),
        ],
    );
    [MAGIC, &unknown.encode_to_vec()].concat()
}

/// A pod as kubelet's status update carries it, zeros and all (Go's encoder writes every
/// field that is not a pointer).
fn pod() -> DynamicMessage {
    let meta = message(
        &format!("{META}ObjectMeta"),
        vec![
            ("name", text("web")),
            ("namespace", text("default")),
            ("uid", text("6d3e")),
            ("resourceVersion", text("41")),
            ("generateName", text("")),
            ("creationTimestamp", time(1_700_000_000)),
            (
                "managedFields",
                Value::List(vec![Value::Message(message(
                    &format!("{META}ManagedFieldsEntry"),
                    vec![
                        ("manager", text("kubelet")),
                        (
                            "fieldsV1",
                            Value::Message(message(
                                &format!("{META}FieldsV1"),
                                vec![("Raw", Value::Bytes(r#"{"f:status":{}}"#.into()))],
                            )),
                        ),
                    ],
                ))]),
            ),
            (
                "labels",
                Value::Map([(MapKey::String("app".into()), text("web"))].into()),
            ),
        ],
    );
    let probe = message(
        &format!("{CORE}Probe"),
        vec![(
            "handler",
            Value::Message(message(
                &format!("{CORE}ProbeHandler"),
                vec![(
                    "httpGet",
                    Value::Message(message(
                        &format!("{CORE}HTTPGetAction"),
                        vec![(
                            "port",
                            Value::Message(message(
                                "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
                                vec![("type", Value::I64(1)), ("strVal", text("http"))],
                            )),
                        )],
                    )),
                )],
            )),
        )],
    );
    let container = message(
        &format!("{CORE}Container"),
        vec![
            ("name", text("web")),
            ("image", text("nginx")),
            ("readinessProbe", Value::Message(probe)),
            (
                "resources",
                Value::Message(message(
                    &format!("{CORE}ResourceRequirements"),
                    vec![(
                        "limits",
                        Value::Map(
                            [(
                                MapKey::String("memory".into()),
                                Value::Message(message(
                                    "k8s.io.apimachinery.pkg.api.resource.Quantity",
                                    vec![("string", text("64Mi"))],
                                )),
                            )]
                            .into(),
                        ),
                    )],
                )),
            ),
        ],
    );
    let status = message(
        &format!("{CORE}PodStatus"),
        vec![
            ("phase", text("Running")),
            ("podIP", text("198.18.0.7")),
            (
                "conditions",
                Value::List(vec![Value::Message(message(
                    &format!("{CORE}PodCondition"),
                    vec![
                        ("type", text("Ready")),
                        ("status", text("True")),
                        ("lastTransitionTime", time(1_700_000_060)),
                        (
                            "lastProbeTime",
                            Value::Message(message(&format!("{META}Time"), vec![])),
                        ),
                    ],
                ))]),
            ),
            (
                "containerStatuses",
                Value::List(vec![Value::Message(message(
                    &format!("{CORE}ContainerStatus"),
                    vec![
                        ("name", text("web")),
                        ("ready", Value::Bool(false)),
                        ("restartCount", Value::I32(0)),
                    ],
                ))]),
            ),
        ],
    );
    message(
        &format!("{CORE}Pod"),
        vec![
            ("metadata", Value::Message(meta)),
            (
                "spec",
                Value::Message(message(
                    &format!("{CORE}PodSpec"),
                    vec![
                        ("containers", Value::List(vec![Value::Message(container)])),
                        ("nodeName", text("edge-1")),
                    ],
                )),
            ),
            ("status", Value::Message(status)),
        ],
    )
}

#[test]
fn a_pod_in_protobuf_reads_as_the_json_kube_apiserver_takes() {
    let body = envelope("v1", "Pod", pod().encode_to_vec());
    let object = protobuf_object_json(&body).expect("a pod reads");
    assert_eq!(
        object,
        json!({
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": "web", "namespace": "default", "uid": "6d3e",
                "resourceVersion": "41", "generateName": "",
                "creationTimestamp": "2023-11-14T22:13:20Z",
                "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
                "labels": {"app": "web"},
            },
            "spec": {
                "containers": [{
                    "name": "web", "image": "nginx",
                    "readinessProbe": {"httpGet": {"port": "http"}},
                    "resources": {"limits": {"memory": "64Mi"}},
                }],
                "nodeName": "edge-1",
            },
            "status": {
                "phase": "Running", "podIP": "198.18.0.7",
                "conditions": [{
                    "type": "Ready", "status": "True",
                    "lastTransitionTime": "2023-11-14T22:14:20Z", "lastProbeTime": null,
                }],
                "containerStatuses": [{"name": "web", "ready": false, "restartCount": 0}],
            },
        })
    );
}

#[test]
fn a_message_sent_twice_is_merged_as_protobuf_reads_it() {
    // A later `status` holding only a podIP changes that one field.
    let mut raw = pod().encode_to_vec();
    let later = message(
        &format!("{CORE}Pod"),
        vec![(
            "status",
            Value::Message(message(
                &format!("{CORE}PodStatus"),
                vec![("podIP", text("198.18.0.9"))],
            )),
        )],
    );
    raw.extend(later.encode_to_vec());
    let object = protobuf_object_json(&envelope("v1", "Pod", raw)).expect("a pod reads");
    assert_eq!(object["status"]["podIP"], "198.18.0.9");
    assert_eq!(object["status"]["phase"], "Running");
}

#[test]
fn an_older_release_field_is_left_out_when_zero_and_refused_otherwise() {
    // ObjectMeta's field 15 was 1.20's `clusterName`, which 1.36 no longer has.
    let with = |value: &str| {
        let mut meta =
            message(&format!("{META}ObjectMeta"), vec![("name", text("n"))]).encode_to_vec();
        meta.push(15 << 3 | 2);
        meta.push(value.len() as u8);
        meta.extend_from_slice(value.as_bytes());
        let node = [vec![1 << 3 | 2, meta.len() as u8], meta].concat();
        protobuf_object_json(&envelope("v1", "Node", node))
    };
    let object = with("").expect("an empty clusterName is nothing");
    assert_eq!(object["metadata"], json!({"name": "n"}));
    let refused = with("east").expect_err("a clusterName is something");
    assert!(
        refused.to_string().contains("field 15 of ObjectMeta"),
        "{refused}"
    );
}

#[test]
fn a_kind_outside_the_schema_or_a_broken_body_is_an_error() {
    let unknown = protobuf_object_json(&envelope("example.com/v1", "Widget", Vec::new()));
    assert!(
        matches!(unknown, Err(TranscodeError::UnknownKind(_))),
        "{unknown:?}"
    );
    assert!(protobuf_object_json(b"{\"kind\":\"Pod\"}").is_err());
    let cut = envelope("v1", "Pod", pod().encode_to_vec());
    for end in [4, 10, cut.len() / 2, cut.len() - 1] {
        assert!(protobuf_object_json(&cut[..end]).is_err(), "cut at {end}");
    }
}

#[test]
fn endpoint_slices_are_described_in_both_versions() {
    for api_version in ["discovery.k8s.io/v1", "discovery.k8s.io/v1beta1"] {
        let slice = message(
            &format!(
                "k8s.io.api.discovery.{}.EndpointSlice",
                api_version.rsplit('/').next().unwrap_or_default()
            ),
            vec![("addressType", text("IPv4"))],
        );
        let object = protobuf_object_json(&envelope(
            api_version,
            "EndpointSlice",
            slice.encode_to_vec(),
        ))
        .expect("a slice reads");
        assert_eq!(object["addressType"], "IPv4");
        assert_eq!(object["apiVersion"], api_version);
    }
}
