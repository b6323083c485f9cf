//! What the host grants a filter through WASI, as Rust's std reads it in a real component
//! (Rust 1.95's imports WASI 0.2.6, wasmtime-wasi defines 0.2.12): a clock that reads zero,
//! no environment, fixed random keys; and what it does not grant (sleeping, files, stdio),
//! which links and traps when called.

use serde_json::{Map, Value, json};

use super::support::{configmap, failures, one, request};
use crate::stream::{Transform, Verdict};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// The annotations `stdprobe` wrote on a ConfigMap, read by a new instance.
fn probe() -> Map<String, Value> {
    let (generation, metrics) = one("stdprobe", "");
    let mut session = generation
        .session(&request("list", CONFIGMAPS), "test")
        .expect("stdprobe applies to configmaps");
    let verdict = session
        .apply(&configmap("c", json!({})))
        .expect("a verdict");
    assert_eq!(
        failures(&metrics, "stdprobe", "trap"),
        0,
        "the probe trapped"
    );
    let Verdict::Replace(bytes) = verdict else {
        panic!("expected the probe's annotations, got {verdict:?}");
    };
    let object: Value = serde_json::from_slice(&bytes).expect("a JSON object");
    object["metadata"]["annotations"]
        .as_object()
        .expect("annotations")
        .clone()
}

#[test]
fn a_filter_reads_a_frozen_clock_no_environment_and_fixed_random_keys() {
    let first = probe();
    assert_eq!(first["edgegate.test/wall-clock"], "0");
    assert_eq!(first["edgegate.test/monotonic"], "0");
    assert_eq!(first["edgegate.test/environment"], "0");
    let second = probe();
    assert_eq!(first["edgegate.test/hash"], second["edgegate.test/hash"]);
}

#[test]
fn what_the_host_does_not_grant_links_and_traps_when_called() {
    let (generation, metrics) = one("stdprobe", "on-error = \"fail\"");
    let mut session = generation
        .session(&request("list", CONFIGMAPS), "test")
        .expect("stdprobe applies to configmaps");
    for (call, import) in [
        ("sleep", "wasi:io/poll@0.2.6#[method]pollable.block"),
        (
            "read-file",
            "wasi:filesystem/preopens@0.2.6#get-directories",
        ),
        ("print", "wasi:cli/stdout@0.2.6#get-stdout"),
    ] {
        let object = configmap(call, json!({"edgegate.test/call": call}));
        let error = session.apply(&object).expect_err("the call traps");
        let stand_in = format!("`{import}` is not provided to filters");
        assert!(
            error.message.contains(&stand_in),
            "{call}: {}",
            error.message
        );
    }
    assert_eq!(failures(&metrics, "stdprobe", "trap"), 3);
    // A fresh instance serves the next object.
    let fine = session
        .apply(&configmap("fine", json!({})))
        .expect("a verdict");
    assert!(matches!(fine, Verdict::Replace(_)), "{fine:?}");
}
