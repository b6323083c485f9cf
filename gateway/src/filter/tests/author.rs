//! `edgegate filter check`, `edgegate filter test` and `edgegate filter bench`.

use serde_json::{Value, json};

use super::support::{filters_dir, temp_dir};
use crate::filter::{FilterError, TestRequest, bench, check, test};

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
        compiled_cache: None,
    }
}

#[test]
fn check_prints_the_manifest_and_settings() {
    let out: Value =
        serde_json::from_str(&check(&filters_dir().join("nodestamp.wasm"), None, None).unwrap())
            .unwrap();
    assert_eq!(out["manifest"]["name"], "nodestamp");
    assert_eq!(out["manifest"]["configSchema"]["type"], "object");
    assert_eq!(out["effective"]["components"], json!(["kubectl"]));

    let dir = temp_dir("author");
    let options = dir.join("nodestamp.toml");
    std::fs::write(&options, "[config]\nannotation = 7").unwrap();
    let error = check(&filters_dir().join("nodestamp.wasm"), Some(&options), None).unwrap_err();
    assert!(matches!(error, FilterError::Schema { .. }), "{error}");

    let truncated = dir.join("broken.wasm");
    std::fs::write(
        &truncated,
        &std::fs::read(filters_dir().join("nodestamp.wasm")).unwrap()[..64],
    )
    .unwrap();
    assert!(matches!(
        check(&truncated, None, None),
        Err(FilterError::Compile { .. })
    ));
    assert!(matches!(
        check(&dir.join("missing.wasm"), None, None),
        Err(FilterError::Read { .. })
    ));
}

#[test]
fn a_compiled_code_store_keeps_the_code_for_the_next_run() {
    let store = temp_dir("author-store").join("compiled");
    let wasm = filters_dir().join("nodestamp.wasm");
    let first = check(&wasm, None, Some(&store)).unwrap();
    let kept: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(
        kept.len() >= 2,
        "the key and the component's code: {kept:?}"
    );
    assert_eq!(check(&wasm, None, Some(&store)).unwrap(), first);
    let mut request = request("nodestamp", "get", "pods");
    request.compiled_cache = Some(store.clone());
    let pod = json!({"kind": "Pod", "metadata": {"name": "p"}}).to_string();
    assert_eq!(
        test(&request, pod.as_bytes()).unwrap(),
        test(
            &TestRequest {
                compiled_cache: None,
                ..request.clone()
            },
            pod.as_bytes()
        )
        .unwrap()
    );
    let after: Vec<_> = std::fs::read_dir(&store).unwrap().collect();
    assert_eq!(after.len(), kept.len(), "nothing compiled anew");
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

/// Where each of `keys` is in `text`, in order.
fn positions(text: &str, keys: &[&str]) -> Vec<usize> {
    keys.iter()
        .map(|key| text.find(&format!("\"{key}\"")).expect(key))
        .collect()
}

#[test]
fn test_keeps_the_order_of_fields_as_written() {
    let stamped = r#"{"metadata": {"name": "q", "annotations": {"edgegate.io/node": "n1"}}, "kind": "Pod", "apiVersion": "v1"}"#;
    let out = test(&request("nodestamp", "get", "pods"), stamped.as_bytes()).unwrap();
    let order = positions(
        &out,
        &["decision", "output", "metadata", "kind", "apiVersion"],
    );
    assert!(order.is_sorted(), "{out}");

    let pod = r#"{"spec": {"z": 1, "a": 2}, "metadata": {"name": "p"}, "kind": "Pod"}"#;
    let list = format!(
        r#"{{"metadata": {{"resourceVersion": "7"}}, "kind": "PodList", "items": [{pod}, {stamped}], "apiVersion": "v1"}}"#
    );
    let out = test(&request("nodestamp", "list", "pods"), list.as_bytes()).unwrap();
    let (decisions, output) = out.split_once("\"output\"").unwrap();
    assert!(decisions.contains("\"decisions\""), "{out}");
    let keys = [
        "resourceVersion",
        "PodList",
        "items",
        "spec",
        "z",
        "a",
        "edgegate.io/node",
        "apiVersion",
    ];
    assert!(positions(output, &keys).is_sorted(), "{out}");
    let parsed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(parsed["decisions"], json!(["replace", "keep"]));
    assert_eq!(
        parsed["output"]["items"][1],
        serde_json::from_str::<Value>(stamped).unwrap()
    );
}

#[test]
fn test_explains_bad_input() {
    let input = br#"{"kind": "Pod"}"#;
    let error = test(&request("nodestamp", "explode", "pods"), input).unwrap_err();
    assert!(error.to_string().contains("unknown verb"), "{error}");
    let error = test(&request("nodestamp", "get", "pods"), b"{not json").unwrap_err();
    assert!(error.to_string().contains("not a JSON object"), "{error}");
    let error = test(&request("nodestamp", "get", "pods"), b"[1]").unwrap_err();
    assert!(error.to_string().contains("not a JSON object"), "{error}");
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
}

/// nodestamp's `edgegate filter bench` report on `input`, for pods.
fn benched(verb: &str, input: &Value, seconds: f64) -> Value {
    let report = bench(
        &request("nodestamp", verb, "pods"),
        input.to_string().as_bytes(),
        seconds,
    );
    serde_json::from_str(&report.unwrap()).unwrap()
}

#[test]
fn bench_times_each_object_and_says_what_was_decided() {
    let pod = json!({"kind": "Pod", "metadata": {"name": "p"}});
    let stamped = json!({"kind": "Pod", "metadata": {"name": "q", "annotations": {"edgegate.io/node": "n1"}}});
    let list = json!({"kind": "PodList", "items": [pod, stamped, pod]});
    let out = benched("list", &list, 0.05);
    assert_eq!(out["objects"], 3);
    assert_eq!(
        out["decisions"],
        json!({"keep": 1, "replace": 2, "drop": 0})
    );
    assert_eq!(out["batched"]["objectsPerCall"], 3);
    // Whole passes only: one call per pass batched, one per object singly.
    let calls = |way: &str| out[way]["calls"].as_u64().unwrap();
    assert!(calls("batched") >= 1 && calls("single") >= 3, "{out}");
    assert_eq!(calls("single") % 3, 0, "{out}");
    for way in ["batched", "single"] {
        assert!(out[way]["usPerObject"].as_f64().unwrap() > 0.0, "{out}");
    }
    // At least the 64 KiB page a Rust filter's heap starts with.
    assert!(
        out["instanceMemoryBytes"].as_u64().unwrap() >= 64 << 10,
        "{out}"
    );

    // One object is the whole of stdin.
    let out = benched("get", &stamped, 0.01);
    assert_eq!(
        (&out["objects"], &out["decisions"]["keep"]),
        (&json!(1), &json!(1))
    );
}

#[test]
fn bench_explains_bad_input() {
    let list = |items: &str| format!(r#"{{"kind": "PodList", "items": {items}}}"#);
    let cases = [
        ("list", list(r#"[{"metadata": {}}]"#), 0.0, "--seconds"),
        ("list", list(r#"[{"metadata": {}}]"#), f64::NAN, "--seconds"),
        ("list", list("[]"), 0.01, "no items"),
        ("list", list("{}"), 0.01, "not an array"),
        ("list", "[1, 2]".to_owned(), 0.01, "not a JSON object"),
        ("list", "{not json".to_owned(), 0.01, "not a JSON object"),
        ("explode", list("[]"), 0.01, "unknown verb"),
    ];
    for (verb, input, seconds, wanted) in cases {
        let error = bench(
            &request("nodestamp", verb, "pods"),
            input.as_bytes(),
            seconds,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains(wanted), "{input} {seconds}: {error}");
    }
    let error = bench(&request("nodestamp", "get", "secrets"), b"{}", 0.01).unwrap_err();
    assert!(error.to_string().contains("does not apply"), "{error}");
}
