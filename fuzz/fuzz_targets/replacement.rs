//! The check of a filter's replacement before it is sent on. The input is an original
//! object and a replacement, split at the first 0xFF byte (which UTF-8 never holds); with
//! no 0xFF, the replacement is the original. Invariants, when the original is a JSON object
//! serde_json reads: an accepted replacement is a JSON object serde_json reads too, and it
//! names the original (same name, namespace and resourceVersion); the original itself is
//! accepted.
#![no_main]

use edgegate::filter::check_replacement;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let (original, replacement) = match data.iter().position(|&b| b == 0xFF) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, data),
    };
    let verdict = check_replacement(original, replacement);
    let Ok(Value::Object(before)) = serde_json::from_slice::<Value>(original) else {
        return;
    };
    if original == replacement {
        assert_eq!(verdict, Ok(()), "the original itself was refused");
    }
    if verdict.is_err() {
        return;
    }
    let after = match serde_json::from_slice::<Value>(replacement) {
        Ok(Value::Object(after)) => after,
        other => panic!(
            "accepted a replacement that is not a JSON object ({other:?}): {}",
            String::from_utf8_lossy(replacement)
        ),
    };
    // Where keys repeat, which one names the object is the reader's choice; the gateway's
    // and serde_json's may differ.
    if !edgegate_fuzz::json_without_duplicate_keys(original)
        || !edgegate_fuzz::json_without_duplicate_keys(replacement)
    {
        return;
    }
    let identity = |object: &serde_json::Map<String, Value>, field: &str| -> Option<String> {
        object
            .get("metadata")?
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if before.get("metadata").is_some_and(|m| {
        m.is_object()
            && ["name", "namespace", "resourceVersion"]
                .iter()
                .all(|f| m.get(*f).is_none_or(Value::is_string))
    }) {
        for field in ["name", "namespace", "resourceVersion"] {
            assert_eq!(
                identity(&before, field).unwrap_or_default(),
                identity(&after, field).unwrap_or_default(),
                "accepted a replacement with another metadata.{field}"
            );
        }
    }
});
