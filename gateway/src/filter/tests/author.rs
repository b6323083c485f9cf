//! `edgegate filter check` and `edgegate filter test`.

use serde_json::{Value, json};

use super::support::{filters_dir, temp_dir};
use crate::filter::{FilterError, TestRequest, check, test};

fn request(wasm: &str, verb: &str, resource: &str) -> TestRequest {
    TestRequest {
        wasm: filters_dir().join(format!("{wasm}.wasm")),
        options: None,
        component: "kubectl".into(),
        verb: verb.into(),
        group: String::new(),
        version: "v1".into(),
        resource: resource.into(),
        namespace: None,
        node_name: "n1".into(),
        node_pool: None,
    }
}

#[test]
fn check_prints_the_manifest_and_settings() {
    let out: Value =
        serde_json::from_str(&check(&filters_dir().join("nodestamp.wasm"), None).unwrap()).unwrap();
    assert_eq!(out["manifest"]["name"], "nodestamp");
    assert_eq!(out["manifest"]["configSchema"]["type"], "object");
    assert_eq!(out["effective"]["components"], json!(["kubectl"]));

    let dir = temp_dir("author");
    let options = dir.join("nodestamp.toml");
    std::fs::write(&options, "[config]\nannotation = 7").unwrap();
    let error = check(&filters_dir().join("nodestamp.wasm"), Some(&options)).unwrap_err();
    assert!(matches!(error, FilterError::Schema { .. }), "{error}");

    let truncated = dir.join("broken.wasm");
    std::fs::write(
        &truncated,
        &std::fs::read(filters_dir().join("nodestamp.wasm")).unwrap()[..64],
    )
    .unwrap();
    assert!(matches!(
        check(&truncated, None),
        Err(FilterError::Compile { .. })
    ));
    assert!(matches!(
        check(&dir.join("missing.wasm"), None),
        Err(FilterError::Read { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn test_runs_an_object_or_a_list() {
    let pod = json!({"kind": "Pod", "metadata": {"name": "p"}});
    let out: Value = serde_json::from_str(
        &test(
            &request("nodestamp", "get", "pods"),
            pod.to_string().as_bytes(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(out["decision"], "replace");
    assert_eq!(
        out["output"]["metadata"]["annotations"]["edgegate.io/node"],
        "n1"
    );

    let stamped = json!({"kind": "Pod", "metadata": {"name": "q", "annotations": {"edgegate.io/node": "n1"}}});
    let list = json!({"kind": "PodList", "items": [pod, stamped]});
    let out: Value = serde_json::from_str(
        &test(
            &request("nodestamp", "list", "pods"),
            list.to_string().as_bytes(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(out["decisions"], json!(["replace", "keep"]));
    assert_eq!(out["output"]["items"].as_array().unwrap().len(), 2);
}

#[test]
fn test_explains_bad_input() {
    let input = br#"{"kind": "Pod"}"#;
    let error = test(&request("nodestamp", "explode", "pods"), input).unwrap_err();
    assert!(error.to_string().contains("unknown verb"), "{error}");
    let error = test(&request("nodestamp", "get", "pods"), b"{not json").unwrap_err();
    assert!(error.to_string().contains("not JSON"), "{error}");
    let error = test(&request("nodestamp", "get", "secrets"), input).unwrap_err();
    assert!(error.to_string().contains("does not apply"), "{error}");
    let mut fail = request("trapper", "get", "configmaps");
    fail.component = "test".into();
    let dir = temp_dir("author-fail");
    std::fs::write(dir.join("t.toml"), "on-error = \"fail\"").unwrap();
    fail.options = Some(dir.join("t.toml"));
    let error = test(
        &fail,
        br#"{"metadata": {"labels": {"edgegate.test/trap": "1"}}}"#,
    )
    .unwrap_err();
    assert!(error.to_string().contains("would fail"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}
