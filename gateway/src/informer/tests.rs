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
fn the_store_keeps_neither_managed_fields_nor_bookkeeping_annotations() {
    let mut service: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": "web", "namespace": "default", "labels": {"app": "web"},
            "annotations": {
                "openyurt.io/topologyKeys": "openyurt.io/nodepool",
                "kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"Service\"}",
            },
            "managedFields": [{"manager": "kubectl", "operation": "Apply",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"ports": [{"port": 80}]},
    }))
    .unwrap();
    slim(&mut service);
    let json = serde_json::to_value(&service).unwrap();
    assert_eq!(json["metadata"].get("managedFields"), None);
    assert_eq!(
        json["metadata"]["annotations"],
        serde_json::json!({"openyurt.io/topologyKeys": "openyurt.io/nodepool"})
    );
    assert_eq!(json["metadata"]["labels"]["app"], "web");
    assert_eq!(json["spec"]["ports"][0]["port"], 80);
    // What lookups read still counts: another topology is another relevance.
    let mut moved = service.clone();
    moved.metadata.annotations.as_mut().unwrap().insert(
        "openyurt.io/topologyKeys".into(),
        "kubernetes.io/hostname".into(),
    );
    assert_ne!(
        relevance(&service, Reads::LabelsAndAnnotations),
        relevance(&moved, Reads::LabelsAndAnnotations)
    );
}
