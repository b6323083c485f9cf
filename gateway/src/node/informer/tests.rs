use super::*;

#[test]
fn a_relist_announces_the_objects_it_changed_or_the_whole_kind() {
    let listing = |entries: &[(&str, u64)]| -> HashMap<String, u64> {
        entries.iter().map(|(k, h)| ((*k).to_owned(), *h)).collect()
    };
    let before = listing(&[("default/web", 1), ("default/db", 2), ("default/gone", 3)]);
    let after = listing(&[("default/web", 1), ("default/db", 4), ("default/new", 5)]);
    let mut keys = changed_keys(&before, &after).unwrap();
    keys.sort_unstable();
    assert_eq!(keys, ["default/db", "default/gone", "default/new"]);
    assert_eq!(changed_keys(&after, &after).unwrap(), Vec::<&str>::new());

    let many: HashMap<String, u64> = (0..=MOST_KEYS_ANNOUNCED)
        .map(|i| (format!("default/s{i}"), 1))
        .collect();
    assert!(changed_keys(&HashMap::new(), &many).is_none());
}

#[test]
fn what_lookups_read_of_an_object_is_its_relevance() {
    let service = |topology: &str| -> SlimObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {
                "name": "web", "namespace": "default", "labels": {"app": "web"},
                "annotations": {
                    "openyurt.io/topologyKeys": topology,
                    "kubectl.kubernetes.io/last-applied-configuration": topology,
                },
            },
            "spec": {"ports": [{"port": 80}]},
        }))
        .unwrap()
    };
    let web = service("openyurt.io/nodepool");
    assert_eq!(key(&web), "default/web");
    // Another topology is another relevance; to nodes, which read labels only, it is not.
    let moved = service("kubernetes.io/hostname");
    assert_ne!(
        relevance(&web, Reads::LabelsAndAnnotations),
        relevance(&moved, Reads::LabelsAndAnnotations)
    );
    assert_eq!(
        relevance(&web, Reads::Labels),
        relevance(&moved, Reads::Labels)
    );
    let (labels, json) = encode(web);
    assert_eq!(labels.get("app").map(String::as_str), Some("web"));
    let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(json["spec"]["ports"][0]["port"], 80);
}
