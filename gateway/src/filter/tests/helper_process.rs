//! Compiling and checking configs in a child process, and falling back to this one.

use serde_json::json;

use super::support::wasm;
use crate::filter::check_config;
use crate::filter::loading::schema::SchemaChecks;
use crate::filter::metrics::{FilterMetrics, Place, PlaceLabels};
use crate::filter::runtime::engine::Runtime;
use crate::filter::runtime::helper_process::HelperProcess;

const SCHEMA: &str = r#"{"type": "object", "properties": {"tag": {"type": "string"}},
                         "additionalProperties": false}"#;

#[test]
fn a_failing_compiler_process_falls_back_to_compiling_here() {
    let scratch = tempfile::tempdir().expect("a scratch dir");
    for exe in ["/bin/false", "/nonexistent/edgegate"] {
        let cache = scratch.path().join(exe.replace('/', "_"));
        let child = HelperProcess::new(exe.into(), cache.clone());
        let reason = child
            .compile(&wasm("tagger"))
            .expect_err("no compiler there");
        assert!(!reason.is_empty());
        let runtime = Runtime::new(Some(&cache), Some(child)).expect("the runtime builds");
        let (_, place) = runtime
            .compile("tagger", &wasm("tagger"))
            .expect("compiled");
        assert_eq!(place, Some(Place::Gateway), "{exe}");
        let again = Runtime::new(Some(&cache), None).expect("the runtime builds");
        let (_, place) = again.compile("tagger", &wasm("tagger")).expect("loaded");
        assert_eq!(
            place, None,
            "{exe}: what the gateway compiled is mapped from the store"
        );
    }
}

#[test]
fn a_bad_component_is_refused_with_the_compilers_error() {
    let scratch = tempfile::tempdir().expect("a scratch dir");
    let cache = scratch.path().join("compiled");
    let child = HelperProcess::new("/bin/false".into(), cache.clone());
    let runtime = Runtime::new(Some(&cache), Some(child)).expect("the runtime builds");
    let truncated = &wasm("tagger")[..1000];
    let error = runtime
        .compile("tagger", truncated)
        .expect_err("a truncated component");
    assert!(error.to_string().contains("tagger"), "{error}");
}

/// Config checks counted at `place`.
fn checks(metrics: &FilterMetrics, place: Place) -> u64 {
    metrics
        .config_checks
        .get_or_create(&PlaceLabels {
            place: place.label(),
        })
        .get()
}

#[test]
fn a_config_check_the_child_cannot_do_is_done_here_with_the_same_verdict() {
    let metrics = FilterMetrics::new();
    let checks_here = SchemaChecks::new(Some(HelperProcess::new(
        "/nonexistent/edgegate".into(),
        "/nonexistent/compiled".into(),
    )));
    let refused = checks_here
        .check(Some(SCHEMA), &json!({"tag": 7}), &metrics)
        .expect_err("a number where the schema wants a string");
    assert!(refused.contains("/tag"), "{refused}");
    checks_here
        .check(Some(SCHEMA), &json!({"tag": "a"}), &metrics)
        .expect("a string passes");
    assert_eq!(checks(&metrics, Place::Gateway), 2);
    assert_eq!(checks(&metrics, Place::Child), 0);
}

#[test]
fn a_pair_that_passed_is_not_checked_again_and_one_refused_is() {
    let metrics = FilterMetrics::new();
    let checks_here = SchemaChecks::new(None);
    for _ in 0..3 {
        checks_here
            .check(Some(SCHEMA), &json!({"tag": "a"}), &metrics)
            .expect("passes");
        assert!(
            checks_here
                .check(Some(SCHEMA), &json!({"tag": 1}), &metrics)
                .is_err()
        );
    }
    checks_here
        .check(Some(SCHEMA), &json!({"tag": "b"}), &metrics)
        .expect("passes");
    assert_eq!(checks(&metrics, Place::Gateway), 1 + 3 + 1);
    assert!(
        checks_here
            .check(None, &json!({"any": 1}), &metrics)
            .is_ok()
    );
    assert_eq!(
        checks(&metrics, Place::Gateway),
        5,
        "no schema, nothing to check"
    );
}

#[test]
fn the_child_side_prints_the_verdict_of_the_check_it_reads() {
    let input = |config: serde_json::Value| {
        serde_json::to_vec(&json!({"schema": SCHEMA, "config": config})).expect("encodes")
    };
    let verdict: serde_json::Value =
        serde_json::from_str(&check_config(&input(json!({"tag": "a"}))).expect("a verdict"))
            .expect("JSON");
    assert_eq!(verdict, json!({"refused": null}));
    let verdict: serde_json::Value =
        serde_json::from_str(&check_config(&input(json!({"tag": 7}))).expect("a verdict"))
            .expect("JSON");
    assert!(
        verdict["refused"]
            .as_str()
            .is_some_and(|r| r.contains("/tag")),
        "{verdict}"
    );
    let broken = serde_json::to_vec(&json!({"schema": "{", "config": {}})).expect("encodes");
    let verdict = check_config(&broken).expect("a verdict");
    assert!(verdict.contains("not JSON"), "{verdict}");
    assert!(check_config(b"not a check").is_err());
}
