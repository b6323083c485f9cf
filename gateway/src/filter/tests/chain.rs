//! The chain: deterministic order, matching by resource, verb and component, overrides
//! from `NAME.toml` and the gateway config, config validation at load.

use serde_json::{Value, json};

use super::support::{Spec, configmap, load, request};
use crate::filter::FilterError;
use crate::stream::{Transform, Verdict};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn tagger<'a>(name: &'a str, toml: &'a str) -> Spec<'a> {
    Spec {
        name,
        wasm: "tagger",
        toml,
    }
}

fn trail(verdict: Verdict) -> String {
    let Verdict::Replace(bytes) = verdict else {
        panic!("expected a replacement, got {verdict:?}");
    };
    let object: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(object["metadata"]["resourceVersion"], "9");
    object["metadata"]["annotations"]["edgegate.test/trail"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_chain_runs_by_priority_then_name() {
    let (generation, _) = load(
        &[
            tagger("zeta", "priority = 1\n[config]\ntag = \"z\""),
            tagger("alpha", "priority = 5\n[config]\ntag = \"a\""),
            tagger("beta", "priority = 1\n[config]\ntag = \"b\""),
            tagger("gamma", "priority = -2\n[config]\ntag = \"g\""),
        ],
        "",
    )
    .unwrap();
    assert_eq!(generation.names(), ["gamma", "beta", "zeta", "alpha"]);
    let mut session = generation
        .session(&request("list", CONFIGMAPS), "test")
        .unwrap();
    assert_eq!(session.filter_names(), ["gamma", "beta", "zeta", "alpha"]);
    assert_eq!(
        trail(session.apply(&configmap("c", json!({}))).unwrap()),
        "g,b,z,a"
    );
    // A drop ends the chain for that object; the next object passes every filter again.
    let marked = configmap("d", json!({"edgegate.test/drop": "b"}));
    assert_eq!(session.apply(&marked).unwrap(), Verdict::Drop);
    let verdicts = session
        .apply_batch(&[marked, configmap("e", json!({}))])
        .unwrap();
    assert_eq!(verdicts[0], Verdict::Drop);
    assert_eq!(trail(verdicts[1].clone()), "g,b,z,a");
}

#[test]
fn filters_apply_by_resource_verb_and_component() {
    let (generation, _) = load(&[tagger("t", "[config]\ntag = \"t\"")], "").unwrap();
    // tagger handles configmaps and pods (get, list, watch) for `test`.
    for (verb, path) in [
        ("list", CONFIGMAPS),
        ("watch", CONFIGMAPS),
        ("get", "/api/v1/namespaces/default/configmaps/x"),
        ("list", "/api/v1/pods"),
        ("list", "/api/v2/namespaces/default/configmaps"),
    ] {
        assert!(
            generation.session(&request(verb, path), "test").is_some(),
            "{verb} {path}"
        );
    }
    for (verb, path, component) in [
        ("list", CONFIGMAPS, "kubelet"),
        ("list", "/api/v1/services", "test"),
        ("create", CONFIGMAPS, "test"),
        ("list", "/apis/other.io/v1/configmaps", "test"),
        ("get", "/api/v1/namespaces/default/pods/p/log", "test"),
        ("get", "/healthz", "test"),
    ] {
        assert!(
            generation
                .session(&request(verb, path), component)
                .is_none(),
            "{verb} {path} {component}"
        );
    }
}

#[test]
fn components_follow_the_filter_file_and_the_gateway_config() {
    let toml = "add-components = [\"kubelet\", \"coredns\"]\nremove-components = [\"test\"]\n[config]\ntag = \"t\"";
    let gateway =
        "[filters.t]\nadd-components = [\"kube-proxy\"]\nremove-components = [\"coredns\"]";
    let (generation, _) = load(&[tagger("t", toml)], gateway).unwrap();
    let list = request("list", CONFIGMAPS);
    for (component, applies) in [
        ("kubelet", true),
        ("kube-proxy", true),
        ("coredns", false),
        ("test", false),
    ] {
        assert_eq!(
            generation.session(&list, component).is_some(),
            applies,
            "{component}"
        );
    }
}

#[test]
fn filters_can_be_disabled_by_their_file_or_the_gateway_config() {
    let specs = [
        tagger("on", "[config]\ntag = \"on\""),
        tagger("off", "enabled = false\n[config]\ntag = \"off\""),
    ];
    let (generation, _) = load(&specs, "").unwrap();
    assert_eq!(generation.names(), ["on"]);
    let (generation, _) = load(&specs, "disabled = [\"on\"]").unwrap();
    assert!(generation.names().is_empty());
    let (generation, _) = load(&specs, "disabled = [\"*\"]").unwrap();
    assert!(
        generation
            .session(&request("list", CONFIGMAPS), "test")
            .is_none()
    );
}

#[test]
fn the_fingerprint_changes_exactly_when_the_applicable_filters_do() {
    let list = request("list", CONFIGMAPS);
    let fingerprint = |toml: &str, component: &str| {
        let (generation, _) = load(
            &[
                tagger("t", toml),
                Spec {
                    name: "stamp",
                    wasm: "nodestamp",
                    toml: "",
                },
            ],
            "",
        )
        .unwrap();
        generation.fingerprint(&list, component)
    };
    let base = fingerprint("[config]\ntag = \"a\"", "test");
    assert_eq!(base, fingerprint("[config]\ntag = \"a\"", "test"));
    assert_ne!(base, fingerprint("[config]\ntag = \"b\"", "test"));
    assert_ne!(
        base,
        fingerprint("priority = 3\n[config]\ntag = \"a\"", "test")
    );
    assert_ne!(base, fingerprint("[config]\ntag = \"a\"", "kubectl"));
}

#[test]
fn a_config_that_breaks_the_schema_is_rejected_with_a_clear_error() {
    let error = load(
        &[Spec {
            name: "b",
            wasm: "bloater",
            toml: "[config]\nbytes = \"lots\"",
        }],
        "",
    )
    .err()
    .expect("a schema error");
    assert!(matches!(error, FilterError::Schema { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with("filter b:")
            && message.contains("/bytes")
            && message.contains("integer"),
        "{message}"
    );

    let error = load(&[tagger("t", "")], "").err().expect("a schema error");
    assert!(error.to_string().contains("tag"), "{error}");

    let error = load(
        &[tagger(
            "t",
            "[limits]\ndeadline-ms = 0\n[config]\ntag = \"x\"",
        )],
        "",
    )
    .err()
    .unwrap();
    assert!(matches!(error, FilterError::Options { .. }), "{error:?}");
}

#[test]
fn nodestamp_gets_the_node_facts() {
    let (generation, metrics) = load(
        &[Spec {
            name: "nodestamp",
            wasm: "nodestamp",
            toml: "",
        }],
        "",
    )
    .unwrap();
    let mut session = generation
        .session(&request("list", "/api/v1/pods"), "kubectl")
        .unwrap();
    let pod =
        bytes::Bytes::from(json!({"metadata": {"name": "p", "resourceVersion": "3"}}).to_string());
    let Verdict::Replace(bytes) = session.apply(&pod).unwrap() else {
        panic!("expected the pod stamped");
    };
    let pod: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(pod["metadata"]["annotations"]["edgegate.io/node"], "edge-1");
    assert_eq!(
        pod["metadata"]["annotations"]["edgegate.io/node-pool"],
        "pool-a"
    );
    // Stamped already: kept, nothing re-encoded.
    assert_eq!(
        session.apply(&bytes::Bytes::from(pod.to_string())).unwrap(),
        Verdict::Keep
    );
    let stamped = metrics
        .guest
        .get_or_create(&crate::filter::metrics::GuestCounterLabels {
            filter: "nodestamp".into(),
            name: "stamped".into(),
        });
    assert_eq!(stamped.get(), 1);
}

#[test]
fn a_pooled_instance_is_given_each_new_context() {
    // nodestamp stamps pods only: an instance still holding the pods context of the previous
    // response would stamp the configmap too.
    let (generation, _) = load(
        &[Spec {
            name: "nodestamp",
            wasm: "nodestamp",
            toml: "[config]\nresources = [\"pods\"]\n",
        }],
        "",
    )
    .unwrap();
    let object =
        bytes::Bytes::from(json!({"metadata": {"name": "o", "resourceVersion": "3"}}).to_string());
    let stamped = |path: &str| {
        let mut session = generation
            .session(&request("list", path), "kubectl")
            .unwrap();
        let verdicts = [
            session.apply(&object).unwrap(),
            session.apply(&object).unwrap(),
        ];
        assert_eq!(
            verdicts[0], verdicts[1],
            "{path}: one context for the response"
        );
        matches!(verdicts[0], Verdict::Replace(_))
    };
    assert!(stamped("/api/v1/pods"));
    assert!(!stamped("/api/v1/configmaps"));
    assert!(stamped("/api/v1/namespaces/default/pods"));
    assert!(!stamped("/api/v1/namespaces/default/configmaps"));
}
