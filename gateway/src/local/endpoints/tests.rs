use serde_json::json;

use super::*;

fn key(group: &str, version: &str, resource: &str) -> ResourceKey {
    ResourceKey {
        component: "kube-proxy".to_owned(),
        resource: resource.to_owned(),
        version: version.to_owned(),
        group: group.to_owned(),
    }
}

fn pod(ip: &str, ready: &str, phase: &str) -> Value {
    json!({
        "metadata": {"name": "web-0", "namespace": "shop"},
        "status": {"phase": phase, "podIP": ip, "conditions": [{"type": "Ready", "status": ready}]}
    })
}

fn target(name: &str) -> Value {
    json!({"kind": "Pod", "namespace": "shop", "name": name})
}

fn slice() -> Value {
    json!({
        "metadata": {"name": "web-abc", "namespace": "shop", "resourceVersion": "7"},
        "endpoints": [
            {"addresses": ["10.88.0.4"], "conditions": {"ready": true, "serving": true, "terminating": false},
             "targetRef": target("web-0")},
            {"addresses": ["10.88.1.9"], "conditions": {"ready": true}, "targetRef": target("web-1")}
        ]
    })
}

#[test]
fn a_slice_endpoint_takes_its_pods_new_address_and_others_are_kept() {
    let resource = key("discovery.k8s.io", "v1beta1", "endpointslices");
    let pod = PodEndpoint::of(&pod("10.88.0.12", "True", "Running"));
    let after = following(&resource, &slice(), &pod).expect("the slice names the pod");
    assert_eq!(after["endpoints"][0]["addresses"], json!(["10.88.0.12"]));
    assert_eq!(after["endpoints"][0]["conditions"]["ready"], true);
    assert_eq!(
        after["endpoints"][1],
        slice()["endpoints"][1],
        "another pod's endpoint"
    );
    assert_eq!(
        following(&resource, &after, &pod),
        None,
        "a slice that already says what the pod says is not written again"
    );
}

#[test]
fn a_pod_not_ready_or_finished_turns_its_endpoint_not_ready() {
    let resource = key("discovery.k8s.io", "v1", "endpointslices");
    for pod in [
        pod("10.88.0.4", "False", "Running"),
        pod("10.88.0.4", "True", "Failed"),
    ] {
        let after = following(&resource, &slice(), &PodEndpoint::of(&pod)).expect("changed");
        assert_eq!(after["endpoints"][0]["conditions"]["ready"], false, "{pod}");
        assert_eq!(
            after["endpoints"][0]["conditions"]["serving"], false,
            "{pod}"
        );
        assert_eq!(after["endpoints"][0]["addresses"], json!(["10.88.0.4"]));
    }
}

#[test]
fn a_pod_without_an_address_keeps_its_endpoints_address() {
    let resource = key("discovery.k8s.io", "v1", "endpointslices");
    let after = following(
        &resource,
        &slice(),
        &PodEndpoint::of(&pod("", "False", "Pending")),
    )
    .expect("changed");
    assert_eq!(after["endpoints"][0]["addresses"], json!(["10.88.0.4"]));
    assert_eq!(after["endpoints"][0]["conditions"]["ready"], false);
}

#[test]
fn serving_and_terminating_are_written_only_where_the_slice_has_them() {
    let resource = key("discovery.k8s.io", "v1beta1", "endpointslices");
    let mut deleting = pod("10.88.0.4", "True", "Running");
    deleting["metadata"]["deletionTimestamp"] = json!("2026-12-04T00:00:00Z");
    let pod = PodEndpoint::of(&deleting);
    let mut bare = slice();
    bare["endpoints"][0]["conditions"] = json!({"ready": true});
    let after = following(&resource, &bare, &pod).expect("changed");
    assert_eq!(after["endpoints"][0]["conditions"], json!({"ready": false}));
    let after = following(&resource, &slice(), &pod).expect("changed");
    assert_eq!(
        after["endpoints"][0]["conditions"],
        json!({"ready": false, "serving": true, "terminating": true})
    );
}

#[test]
fn an_endpoints_address_moves_between_its_lists_with_the_pods_readiness() {
    let resource = key("", "v1", "endpoints");
    let endpoints = json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "subsets": [{
            "addresses": [
                {"ip": "10.88.0.4", "nodeName": "edge-1", "targetRef": target("web-0")},
                {"ip": "10.88.1.9", "nodeName": "edge-2", "targetRef": target("web-1")}
            ],
            "ports": [{"port": 80, "protocol": "TCP"}]
        }]
    });
    let down = PodEndpoint::of(&pod("10.88.0.12", "False", "Running"));
    let after = following(&resource, &endpoints, &down).expect("changed");
    let subset = &after["subsets"][0];
    assert_eq!(
        subset["addresses"],
        json!([endpoints["subsets"][0]["addresses"][1]])
    );
    assert_eq!(subset["notReadyAddresses"][0]["ip"], "10.88.0.12");
    assert_eq!(subset["notReadyAddresses"][0]["nodeName"], "edge-1");

    let up = PodEndpoint::of(&pod("10.88.0.12", "True", "Running"));
    let again = following(&resource, &after, &up).expect("changed");
    let subset = &again["subsets"][0];
    assert!(subset.get("notReadyAddresses").is_none(), "{subset}");
    assert_eq!(subset["addresses"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        following(&resource, &again, &up),
        None,
        "nothing left to change"
    );
}

#[test]
fn objects_naming_other_pods_or_none_are_left_alone() {
    let pod = PodEndpoint::of(&pod("10.88.0.12", "True", "Running"));
    let other = json!({"endpoints": [{"addresses": ["10.88.1.9"], "targetRef": target("web-1")}]});
    let slices = key("discovery.k8s.io", "v1", "endpointslices");
    assert_eq!(following(&slices, &other, &pod), None);
    assert_eq!(following(&slices, &json!({"metadata": {}}), &pod), None);
    let same_name_elsewhere = json!({"endpoints": [{"addresses": ["10.9.0.1"],
        "targetRef": {"kind": "Pod", "namespace": "other", "name": "web-0"}}]});
    assert_eq!(following(&slices, &same_name_elsewhere, &pod), None);
    assert_eq!(
        following(&key("", "v1", "endpoints"), &json!({"subsets": null}), &pod),
        None
    );
}
