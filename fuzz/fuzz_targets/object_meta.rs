//! An object's metadata as the gateway reads it: scanned (`Meta::parse_checked`, which the
//! cache writer runs on a GET's object before anything has read it as JSON), parsed
//! (`Meta::parse`), and the two held together (`Meta::reads_whole`, asked of such an object
//! before it is stored). Invariants: no input panics; what `reads_whole` accepts serde_json
//! reads whole, with the metadata the scan found; and for a JSON object without repeated
//! keys the scan and the parse agree, and `reads_whole` accepts it exactly when the parse
//! does.
#![no_main]

use edgegate::stream::Meta;
use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let scanned = Meta::parse_checked(data).ok();
    let parsed = Meta::parse(data).ok();
    let whole = Meta::reads_whole(data);
    if whole {
        assert!(
            serde_json::from_slice::<IgnoredAny>(data).is_ok(),
            "read whole, but not JSON: {}",
            String::from_utf8_lossy(data)
        );
        assert_eq!(scanned, parsed, "read whole with other metadata");
    }
    let is_object = serde_json::from_slice::<Value>(data).is_ok_and(|value| value.is_object());
    if is_object && edgegate_fuzz::json_without_duplicate_keys(data) {
        assert_eq!(
            scanned,
            parsed,
            "the scan and the parse disagree: {}",
            String::from_utf8_lossy(data)
        );
        assert_eq!(whole, parsed.is_some(), "{}", String::from_utf8_lossy(data));
    }
});
