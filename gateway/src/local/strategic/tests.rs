use serde_json::{Value, json};

use super::*;

fn patched(mut object: Value, patch: Value) -> Value {
    apply(&mut object, &patch).unwrap();
    object
}

/// A pod's status as kubelet last wrote it before the node went down.
fn pod() -> Value {
    json!({
        "metadata": {"name": "web", "namespace": "a", "uid": "u1", "finalizers": ["x"]},
        "spec": {"nodeName": "edge-1", "containers": [
            {"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
        ]},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "PodScheduled", "status": "True"}
            ],
            "podIP": "10.88.0.5",
            "podIPs": [{"ip": "10.88.0.5"}],
            "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0}]
        }
    })
}

#[test]
fn kubelets_status_patch_after_a_reboot_merges_conditions_and_replaces_statuses() {
    // What kubelet 1.20's status manager sends (strategicpatch.CreateTwoWayMergePatch of the
    // old and new status, the uid as its precondition).
    let patch = json!({
        "metadata": {"uid": "u1"},
        "status": {
            "$setElementOrder/conditions": [
                {"type": "Initialized"}, {"type": "Ready"}, {"type": "ContainersReady"}, {"type": "PodScheduled"}
            ],
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
                {"type": "ContainersReady", "status": "False"}
            ],
            "containerStatuses": [{"name": "c", "ready": false, "restartCount": 1}],
            "podIP": "10.88.0.9",
            "podIPs": [{"ip": "10.88.0.9"}, {"$patch": "delete", "ip": "10.88.0.5"}]
        }
    });
    let pod = patched(pod(), patch);
    let status = &pod["status"];
    let types: Vec<&str> = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
    );
    assert_eq!(
        status["conditions"][1],
        json!({"type": "Ready", "status": "False", "reason": "ContainersNotReady"})
    );
    assert_eq!(status["conditions"][0]["status"], "True");
    assert_eq!(
        status["containerStatuses"],
        json!([{"name": "c", "ready": false, "restartCount": 1}])
    );
    assert_eq!(status["podIPs"], json!([{"ip": "10.88.0.9"}]));
    assert_eq!(status["podIP"], "10.88.0.9");
    assert_eq!(status["phase"], "Running");
    assert_eq!(pod["metadata"]["uid"], "u1");
}

#[test]
fn containers_merge_by_name_and_their_env_by_name() {
    let pod = patched(
        pod(),
        json!({"spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]}}),
    );
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], "i");
    assert_eq!(
        container["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}])
    );
}

#[test]
fn nulls_remove_and_directives_replace_delete_and_retain() {
    let pod = patched(
        pod(),
        json!({"status": {"podIP": null, "conditions": [{"$patch": "replace"}, {"type": "Ready", "status": "True"}]}}),
    );
    assert!(pod["status"].get("podIP").is_none());
    assert_eq!(
        pod["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}])
    );

    let pod = patched(
        pod,
        json!({"status": {"$patch": "replace", "phase": "Failed"}}),
    );
    assert_eq!(pod["status"], json!({"phase": "Failed"}));

    let pod = patched(
        pod,
        json!({"spec": {"$retainKeys": ["nodeName"], "nodeName": "edge-1"}}),
    );
    assert_eq!(pod["spec"], json!({"nodeName": "edge-1"}));

    let pod = patched(
        pod,
        json!({"metadata": {"finalizers": ["y"], "$deleteFromPrimitiveList/finalizers": ["x"]}}),
    );
    assert_eq!(pod["metadata"]["finalizers"], json!(["y"]));

    let pod = patched(pod, json!({"status": {"$patch": "delete"}}));
    assert!(pod.get("status").is_none());
}

#[test]
fn a_node_patch_merges_its_conditions_and_addresses_by_type() {
    let node = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}],
        "addresses": [{"type": "InternalIP", "address": "198.18.0.2"}, {"type": "Hostname", "address": "edge-1"}],
        "images": [{"names": ["a"]}]
    }});
    let node = patched(
        node,
        json!({"status": {
            "conditions": [{"type": "Ready", "status": "False"}],
            "addresses": [{"type": "InternalIP", "address": "198.18.0.3"}],
            "images": [{"names": ["b"]}]
        }}),
    );
    assert_eq!(
        node["status"]["conditions"][0],
        json!({"type": "Ready", "status": "False"})
    );
    assert_eq!(node["status"]["conditions"][1]["type"], "MemoryPressure");
    assert_eq!(node["status"]["addresses"][0]["address"], "198.18.0.3");
    assert_eq!(node["status"]["addresses"][1]["address"], "edge-1");
    assert_eq!(node["status"]["images"], json!([{"names": ["b"]}]));
}

#[test]
fn patches_kube_apiserver_refuses_are_refused() {
    for patch in [
        json!([1]),
        json!({"status": {"$patch": "sideways"}}),
        json!({"status": {"conditions": [{"status": "True"}]}}),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}}),
        json!({"$patch": "delete"}),
    ] {
        let mut object = pod();
        assert!(apply(&mut object, &patch).is_err(), "{patch}");
    }
}
