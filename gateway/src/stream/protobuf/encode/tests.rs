use serde_json::json;

use super::*;
use crate::stream::protobuf::described::protobuf_object_json;
use crate::stream::protobuf::recorded::without_nulls;

fn round_trip(object: &Json) -> Json {
    let protobuf = json_object_protobuf(object).expect("written");
    assert!(protobuf.starts_with(MAGIC));
    protobuf_object_json(&protobuf).expect("read back")
}

/// Every object kube-apiserver 1.20.2 sent on the recorded JSON watches of Services and
/// v1beta1 EndpointSlices reads back from its protobuf as it was.
#[test]
fn the_recorded_objects_read_back_as_they_were() {
    let recordings: [&[u8]; 2] = [
        include_bytes!("../recorded/services.json"),
        include_bytes!("../recorded/endpointslices-v1beta1.json"),
    ];
    let mut objects = 0;
    for recording in recordings {
        for line in recording.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let event: Json = serde_json::from_slice(line).unwrap();
            let object = without_nulls(event["object"].clone());
            assert_eq!(round_trip(&object), object);
            objects += 1;
        }
    }
    assert_eq!(objects, 11);
}

/// A pod with what the schema writes its own way: inlined structs (a volume's source, a
/// probe's handler), quantities, int-or-strings, times, managed fields and a map.
#[test]
fn a_pod_reads_back_as_it_was() {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "a",
            "uid": "6f1c",
            "resourceVersion": "42",
            "creationTimestamp": "2026-12-06T05:00:00Z",
            "labels": {"app": "web", "tier": "front"},
            "managedFields": [{
                "manager": "kubectl",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-12-06T05:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
            }]
        },
        "spec": {
            "nodeName": "edge-1",
            "volumes": [{"name": "data", "hostPath": {"path": "/srv", "type": "Directory"}}],
            "containers": [{
                "name": "web",
                "image": "busybox",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}},
                "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5},
                "readinessProbe": {"tcpSocket": {"port": 80}}
            }],
            "terminationGracePeriodSeconds": 30,
            "hostNetwork": false
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-06T05:00:01Z"}],
            "podIP": "198.19.0.7"
        }
    });
    assert_eq!(round_trip(&pod), pod);
}

#[test]
fn a_member_the_schema_does_not_know_is_refused_not_lost() {
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"nodeName": "a", "warpDrive": true}});
    let error = json_object_protobuf(&pod).unwrap_err().to_string();
    assert!(error.contains("warpDrive"), "{error}");
    let kind = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
    assert!(matches!(
        json_object_protobuf(&kind),
        Err(TranscodeError::UnknownKind(_))
    ));
    let wrong = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"nodeName": 7}});
    assert!(json_object_protobuf(&wrong).is_err());
}

#[test]
fn the_envelope_is_written_as_go_writes_it() {
    let written = envelope("v1", "Pod", b"\x0a\x00");
    let expected = [
        MAGIC,
        b"\x0a\x09\x0a\x02v1\x12\x03Pod",
        b"\x12\x02\x0a\x00",
        b"\x1a\x00\x22\x00",
    ]
    .concat();
    assert_eq!(written, expected);
}
