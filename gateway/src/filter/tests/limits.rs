//! Per-call limits and failure policies, against the hostile filters.

use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::json;

use super::support::{configmap, failures, one, request};
use crate::filter::metrics::FilterLabels;
use crate::filter::{Generation, Session};
use crate::stream::{Transform, Verdict};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// The filtering of a list of ConfigMaps for the `test` component, which the hostile
/// filters apply to.
fn configmaps_list(generation: &Generation) -> Session {
    generation
        .session(&request("list", CONFIGMAPS), "test")
        .unwrap()
}

#[test]
fn an_infinite_loop_is_stopped_at_its_deadline_and_each_policy_applies() {
    let object = configmap("a", json!({}));
    for (policy, expected) in [
        ("keep", Some(Verdict::Keep)),
        ("drop", Some(Verdict::Drop)),
        ("fail", None),
    ] {
        let (generation, metrics) = one(
            "looper",
            &format!("on-error = \"{policy}\"\n[limits]\ndeadline-ms = 50"),
        );
        let mut session = configmaps_list(&generation);
        let started = Instant::now();
        let verdict = session.apply(&object);
        let took = started.elapsed();
        println!("looper ({policy}) stopped after {took:?} (deadline 50 ms)");
        assert!(
            took >= Duration::from_millis(50),
            "stopped before its deadline: {took:?}"
        );
        assert!(
            took < Duration::from_secs(2),
            "not stopped in time: {took:?}"
        );
        match expected {
            Some(expected) => assert_eq!(verdict.unwrap(), expected, "{policy}"),
            None => {
                let error = verdict.unwrap_err();
                assert!(
                    error.message.contains("looper") && error.message.contains("deadline"),
                    "{}",
                    error.message
                );
            }
        }
        assert_eq!(failures(&metrics, "looper", "deadline"), 1, "{policy}");
    }
}

#[test]
fn a_filter_that_keeps_running_out_of_time_is_no_longer_called_in_that_response() {
    let (generation, metrics) = one("looper", "on-error = \"drop\"\n[limits]\ndeadline-ms = 20");
    let mut session = configmaps_list(&generation);
    let objects: Vec<_> = (0..6)
        .map(|i| configmap(&format!("c{i}"), json!({})))
        .collect();
    let started = Instant::now();
    let verdicts = session.apply_batch(&objects).unwrap();
    println!("six looping objects took {:?}", started.elapsed());
    assert_eq!(verdicts, vec![Verdict::Drop; 6]);
    // The batch call and two single calls ran out of time (three strikes); the other four
    // objects got the policy without a call.
    assert_eq!(failures(&metrics, "looper", "deadline"), 3);
}

#[test]
fn a_memory_bomb_hits_its_cap_and_traps() {
    // A deadline far beyond any machine's time to touch 16 MiB: the cap is what stops it
    // (a fresh virtual machine's first touch of its pages took longer than the default).
    let settings = "on-error = \"drop\"\n[limits]\nmemory-mib = 16\ndeadline-ms = 60000";
    let (generation, metrics) = one("membomb", settings);
    let mut session = generation
        .session(&request("get", &format!("{CONFIGMAPS}/a")), "test")
        .unwrap();
    assert_eq!(
        session.apply(&configmap("a", json!({}))).unwrap(),
        Verdict::Drop
    );
    assert_eq!(failures(&metrics, "membomb", "memory"), 1);
    // The trapped instance is gone; the next call gets a fresh one (which blows up again).
    assert_eq!(
        session.apply(&configmap("b", json!({}))).unwrap(),
        Verdict::Drop
    );
    assert_eq!(failures(&metrics, "membomb", "memory"), 2);
}

#[test]
fn after_a_trap_the_next_call_succeeds_on_a_fresh_instance() {
    let marked = configmap("bad", json!({"edgegate.test/trap": "yes"}));
    let fine = configmap("good", json!({}));
    let (generation, metrics) = one("trapper", "on-error = \"fail\"");
    let mut session = configmaps_list(&generation);
    assert_eq!(session.apply(&fine).unwrap(), Verdict::Keep);
    let error = session.apply(&marked).unwrap_err();
    assert!(error.message.contains("trapped"), "{}", error.message);
    assert_eq!(session.apply(&fine).unwrap(), Verdict::Keep);
    assert_eq!(failures(&metrics, "trapper", "trap"), 1);
    drop(session);
    // A later response of the same filter is served too.
    let mut next = configmaps_list(&generation);
    assert_eq!(next.apply(&fine).unwrap(), Verdict::Keep);
}

#[test]
fn a_trap_in_a_batch_applies_the_policy_to_that_object_only() {
    let (generation, metrics) = one("trapper", "on-error = \"drop\"");
    let mut session = configmaps_list(&generation);
    let objects = [
        configmap("a", json!({})),
        configmap("b", json!({"edgegate.test/trap": "yes"})),
        configmap("c", json!({})),
    ];
    let verdicts = session.apply_batch(&objects).unwrap();
    assert_eq!(verdicts, [Verdict::Keep, Verdict::Drop, Verdict::Keep]);
    // The batch trapped, then the marked object alone.
    assert_eq!(failures(&metrics, "trapper", "trap"), 2);
}

#[test]
fn a_filter_failing_again_and_again_is_turned_off_and_its_policy_applies() {
    let marked = configmap("bad", json!({"edgegate.test/trap": "yes"}));
    let fine = configmap("good", json!({}));
    let toml = "on-error = \"drop\"\n[disable-after]\nfailures = 3\nwithin-s = 3600";
    let (generation, metrics) = one("trapper", toml);
    let series = |family: &Family<FilterLabels, Counter>| {
        family
            .get_or_create(&FilterLabels {
                filter: "trapper".into(),
            })
            .get()
    };
    let mut session = configmaps_list(&generation);
    for _ in 0..2 {
        assert_eq!(session.apply(&marked).unwrap(), Verdict::Drop);
        assert_eq!(
            session.apply(&fine).unwrap(),
            Verdict::Keep,
            "a fresh instance"
        );
    }
    assert_eq!(series(&metrics.turned_off), 0);
    assert_eq!(session.apply(&marked).unwrap(), Verdict::Drop, "the third");
    assert_eq!(series(&metrics.turned_off), 1);
    assert_eq!(
        series(&metrics.reloads),
        3,
        "each trap replaced the instance"
    );
    // Turned off: no longer called, and its policy applies to every object, in this response
    // and the next.
    let calls = series(&metrics.calls);
    assert_eq!(session.apply(&fine).unwrap(), Verdict::Drop);
    let mut next = configmaps_list(&generation);
    assert_eq!(next.apply(&fine).unwrap(), Verdict::Drop);
    assert_eq!(
        next.apply_batch(&[fine.clone(), marked.clone()]).unwrap(),
        [Verdict::Drop, Verdict::Drop]
    );
    assert_eq!(series(&metrics.calls), calls);
    assert_eq!(failures(&metrics, "trapper", "trap"), 3);
    // Loaded again, it is on again.
    let (generation, _) = one("trapper", toml);
    assert_eq!(
        configmaps_list(&generation).apply(&fine).unwrap(),
        Verdict::Keep
    );
}

#[test]
fn instances_report_the_memory_they_grew_to() {
    let (generation, metrics) = one("trapper", "");
    configmaps_list(&generation)
        .apply(&configmap("a", json!({})))
        .unwrap();
    let bytes = metrics
        .memory
        .get_or_create(&FilterLabels {
            filter: "trapper".into(),
        })
        .get();
    // A Rust filter's heap starts at a few pages of 64 KiB.
    assert!(bytes >= 64 << 10, "{bytes}");
}

/// The longest deadline a filter may be given: the tests of other limits must not trip the
/// deadline first on a slow or loaded machine (writing 8 MiB took over 100 ms under load).
const NO_DEADLINE: &str = "[limits]\ndeadline-ms = 60000";

#[test]
fn an_oversized_replace_is_refused_and_the_policy_applies() {
    let object = configmap("a", json!({}));
    // 8 MiB against the default 3 MiB cap.
    let (generation, metrics) = one("bloater", &format!("on-error = \"drop\"\n{NO_DEADLINE}"));
    let mut session = configmaps_list(&generation);
    assert_eq!(session.apply(&object).unwrap(), Verdict::Drop);
    assert_eq!(failures(&metrics, "bloater", "oversized"), 1);
    // The instance was not poisoned: the same one answers again.
    assert_eq!(session.apply(&object).unwrap(), Verdict::Drop);

    let (generation, _) = one(
        "bloater",
        &format!("on-error = \"keep\"\n{NO_DEADLINE}\nmax-output-kib = 1\n[config]\nbytes = 2000"),
    );
    let mut session = configmaps_list(&generation);
    assert_eq!(session.apply(&object).unwrap(), Verdict::Keep);

    let (generation, _) = one(
        "bloater",
        &format!("{NO_DEADLINE}\nmax-output-kib = 2\n[config]\nbytes = 2000"),
    );
    let mut session = configmaps_list(&generation);
    match session.apply(&object).unwrap() {
        Verdict::Replace(bytes) => assert_eq!(bytes.len(), 2000),
        other => panic!("expected a replacement, got {other:?}"),
    }
}

#[test]
fn a_replacement_that_is_not_json_or_not_the_same_object_is_refused() {
    let objects = [configmap("a", json!({})), configmap("b", json!({}))];
    for (corrupt, on_error, verdict) in [
        ("json", "drop", Verdict::Drop),
        ("name", "keep", Verdict::Keep),
    ] {
        let (generation, metrics) = one(
            "bloater",
            &format!("on-error = \"{on_error}\"\n[config]\ncorrupt = \"{corrupt}\""),
        );
        let mut session = configmaps_list(&generation);
        assert_eq!(session.apply(&objects[0]).unwrap(), verdict, "{corrupt}");
        assert_eq!(
            session.apply_batch(&objects).unwrap(),
            [verdict.clone(), verdict],
            "{corrupt}"
        );
        assert_eq!(failures(&metrics, "bloater", "bad_output"), 3, "{corrupt}");
        // Refusing the output does not poison the instance: no other failure was counted.
        assert_eq!(failures(&metrics, "bloater", "trap"), 0, "{corrupt}");
    }
}
