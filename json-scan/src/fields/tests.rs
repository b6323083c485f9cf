//! The field scans on text chosen to trip them: escapes, braces in strings, text cut short.

use std::ops::Range;

use super::*;

fn text(bytes: &[u8], raw: Range<usize>) -> &str {
    std::str::from_utf8(&bytes[raw]).unwrap()
}

#[test]
fn a_field_is_found_without_reading_what_follows_it() {
    let bytes = br#" { "kind" : "A", "s": "}\"{", "metadata" : {"name": "n"}, "spec": "#;
    let range = field_range(bytes, "metadata").unwrap();
    assert_eq!(text(bytes, range), r#"{"name": "n"}"#);
    assert_eq!(field_range(bytes, "spec"), None, "the text ends inside it");
    let escaped = br#"{"metad\u0061ta": 1}"#;
    assert_eq!(
        text(escaped, field_range(escaped, "metadata").unwrap()),
        "1"
    );
    assert_eq!(field_range(br#"{"kind": "A"}"#, "metadata"), None);
    assert_eq!(field_range(b"{}", "metadata"), None);
    assert_eq!(field_range(b"[1]", "metadata"), None);
}

#[test]
fn several_fields_are_found_in_one_scan() {
    let bytes =
        br#" { "name" : "n", "s": "}\"{", "n\u0061mespace": "ns", "x": {"name": 1}, "uid": [] } "#;
    let [name, namespace, version, uid] =
        field_ranges(bytes, &[], ["name", "namespace", "resourceVersion", "uid"]).unwrap();
    assert_eq!(text(bytes, name.unwrap()), r#""n""#);
    assert_eq!(text(bytes, namespace.unwrap()), r#""ns""#, "an escaped key");
    assert_eq!(version, None);
    assert_eq!(text(bytes, uid.unwrap()), "[]");
    assert_eq!(field_ranges(b"{}", &[], ["name"]), Some([None]));
    assert_eq!(
        field_ranges(br#"{"name": "a", "name": "b"}"#, &[], ["name", "namespace"]),
        None,
        "a wanted key given twice"
    );
    assert!(field_ranges(br#"{"uid": 1, "uid": 2}"#, &[], ["name"]).is_some());
    assert_eq!(field_ranges(b"[1]", &[], ["name"]), None);
    assert_eq!(
        field_ranges(br#"{"name": "a", "uid": "#, &[], ["name", "namespace"]),
        None,
        "cut short"
    );
    let found_first = br#"{"name": "a", "namespace": "b", "name": "c", "rest": "#;
    let [name, namespace] = field_ranges(found_first, &[], ["name", "namespace"]).unwrap();
    assert_eq!(
        text(found_first, name.unwrap()),
        r#""a""#,
        "nothing after the last is read"
    );
    assert_eq!(text(found_first, namespace.unwrap()), r#""b""#);
    let nested = br#"{"kind": "A", "metadata": {"uid": "u", "name": "m"}, "name": "top", "x": 1}"#;
    let [name] = field_ranges(nested, &["metadata"], ["name"]).unwrap();
    assert_eq!(text(nested, name.unwrap()), r#""m""#);
    assert_eq!(
        field_ranges(nested, &["spec"], ["name"]),
        Some([None]),
        "nothing there"
    );
    assert_eq!(
        field_ranges(nested, &["kind"], ["name"]),
        None,
        "not an object"
    );
}
#[test]
fn a_replacement_keeps_the_fields_before_its_first_change() {
    // The kept keys' text, and the text from where the rest is read.
    let kept = |original: &[u8], replacement: &'static [u8]| -> (Vec<&'static str>, &'static str) {
        let kept = kept_fields(original, replacement).unwrap();
        let text =
            |range: std::ops::Range<usize>| std::str::from_utf8(&replacement[range]).unwrap();
        let keys = kept.keys.into_iter().map(text).collect();
        (keys, text(kept.rest..replacement.len()))
    };
    let original =
        br#"{"kind":"Service","metadata":{"name":"s"},"spec":{"type":"ClusterIP"},"status":{}}"#;
    assert_eq!(
        kept(
            original,
            br#"{"kind":"Service","metadata":{"name":"s"},"spec":{"type":"NodePort"},"status":{}}"#
        ),
        (
            vec![r#""kind""#, r#""metadata""#],
            r#","spec":{"type":"NodePort"},"status":{}}"#
        )
    );
    // Kept whole, or all but the spaces at its end.
    let all = vec![r#""kind""#, r#""metadata""#, r#""spec""#, r#""status""#];
    assert_eq!(kept(original, original), (all.clone(), "}"));
    assert_eq!(
        kept(original, br#"{"kind":"Service","metadata":{"name":"s"},"spec":{"type":"ClusterIP"},"status":{}} "#),
        (all, "} ")
    );
    // A field is kept only with the byte after it: a number the original goes on with is
    // not the original's.
    assert_eq!(
        kept(br#"{"a":12,"b":1}"#, br#"{"a":1,"b":1}"#),
        (vec![], r#""a":1,"b":1}"#)
    );
    assert_eq!(
        kept(br#"{"a":"x"}"#, br#"{"a":"x" }"#),
        (vec![], r#""a":"x" }"#)
    );
    assert_eq!(
        kept(br#"{"a":"x"}"#, br#"{"a":"xy"}"#),
        (vec![], r#""a":"xy"}"#)
    );
    // A change inside the first field, or in the spaces before it.
    assert_eq!(
        kept(original, br#"{"kind":"S"}"#),
        (vec![], r#""kind":"S"}"#)
    );
    assert_eq!(
        kept(original, br#" { "kind":1}"#),
        (vec![], r#" "kind":1}"#)
    );
    assert_eq!(kept(original, b"{}"), (vec![], "}"));
    // Another order: only the common start is kept, the rest is read.
    let moved = br#"{"metadata":{"name":"s"},"kind":"Service"}"#;
    assert_eq!(
        kept(original, moved),
        (vec![], r#""metadata":{"name":"s"},"kind":"Service"}"#)
    );
    // Not begun as an object; what follows the brace is the reader's to check.
    for not_an_object in [&b"[1]"[..], b"", b"null", b" \n"] {
        assert_eq!(kept_fields(original, not_an_object), None);
    }
    assert_eq!(kept(original, br#"{"kind" 1}"#), (vec![], r#""kind" 1}"#));
}

#[test]
fn the_common_start_is_found_across_and_within_blocks() {
    let text: Vec<u8> = (0..40u8).collect();
    assert_eq!(common_start(&text, &text), 40);
    assert_eq!(common_start(&text, &text[..17]), 17);
    assert_eq!(common_start(&[], &text), 0);
    for at in [0, 1, 15, 16, 17, 31, 32, 39] {
        let mut other = text.clone();
        other[at] ^= 0xff;
        assert_eq!(common_start(&text, &other), at, "differing at {at}");
    }
}
