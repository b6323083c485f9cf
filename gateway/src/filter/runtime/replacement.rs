//! What a filter's replacement must be before it goes to the client and the cache: a JSON
//! object that is still the object it replaces (same name, namespace and resourceVersion,
//! so watch state and cache keys stay those of the object the upstream sent).
//!
//! Only what the filter changed is read: the top-level fields before the first byte where
//! the replacement differs from the original are the upstream's own bytes, passed on as the
//! gateway passes on a response no filter handles; every field from there on is parsed, so
//! a filter never sends a client text it cannot decode.

use std::borrow::Cow;

use edgegate_json_scan::kept_fields;

use crate::stream::Meta;

mod changed_fields;
mod common_tail;

use changed_fields::{ChangedFields, NotJson};
use common_tail::CommonTail;

/// Why a replacement is refused, for the failure's message; `Ok` when it may be sent.
pub fn check_replacement(original: &[u8], replacement: &[u8]) -> Result<(), String> {
    // An original the gateway cannot read has nothing to keep the replacement to.
    let names_the_original = |replaced: &Meta| match Meta::parse_checked(original) {
        Ok(original) => same_object(&original, replaced),
        Err(_) => Ok(()),
    };
    let kept = kept_fields(original, replacement).ok_or(NotJson)?;
    let mut has_metadata = kept
        .keys
        .iter()
        .any(|key| is_metadata(&replacement[key.clone()]));
    // `serde_json` skips strings it does not build without checking their UTF-8 when it
    // reads bytes, so the rest is checked first, and then read as text.
    let text = std::str::from_utf8(&replacement[kept.rest..]).map_err(|_| NotJson)?;
    // Where the rest ends as the original's does, it is the original's text: it names the
    // original if the kept metadata does.
    let mut ending = match has_metadata {
        true => CommonTail::new(
            &original[kept.rest..],
            text.as_bytes(),
            kept.same.saturating_sub(kept.rest),
        ),
        false => None,
    };
    let mut rest = ChangedFields::new(text, kept.keys.is_empty());
    while let Some(key) = rest.key()? {
        if is_metadata(key.as_bytes()) {
            has_metadata = true;
            names_the_original(&rest.value::<Meta>()?)?;
        } else if rest.skip(ending.as_mut())? {
            return Ok(());
        }
    }
    if has_metadata {
        Ok(())
    } else {
        names_the_original(&Meta::default())
    }
}

/// Whether a key's JSON text (quotes included) is `metadata`, however escaped.
fn is_metadata(key: &[u8]) -> bool {
    key == br#""metadata""#
        || (key.contains(&b'\\')
            && serde_json::from_slice::<Cow<str>>(key).is_ok_and(|key| key == "metadata"))
}

/// Whether the replaced metadata names the original object, at its version.
fn same_object(original: &Meta, replaced: &Meta) -> Result<(), String> {
    let fields: [(&str, &Cow<str>, &Cow<str>); 3] = [
        ("name", &original.name, &replaced.name),
        ("namespace", &original.namespace, &replaced.namespace),
        (
            "resourceVersion",
            &original.resource_version,
            &replaced.resource_version,
        ),
    ];
    match fields
        .into_iter()
        .find(|(_, before, after)| before != after)
    {
        Some((field, before, after)) => Err(format!(
            "changed metadata.{field} from {before:?} to {after:?}"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::check_replacement;

    const POD: &[u8] =
        br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}}"#;

    #[test]
    fn the_same_object_edited_is_accepted() {
        let edited = br#"{"kind":"Pod","metadata":{"resourceVersion":"7","namespace":"ns","name":"p","labels":{"a":"b"}},"spec":{}}"#;
        assert_eq!(check_replacement(POD, edited), Ok(()));
        assert_eq!(check_replacement(POD, POD), Ok(()));
        // A number the original goes on with, and one made longer.
        let numbered = |n: &str| {
            format!(
                r#"{{"kind":"Pod","metadata":{{"name":"p","namespace":"ns","resourceVersion":"7"}},"n":{n}}}"#
            )
        };
        for (before, after) in [("12", "1"), ("1", "1.5"), ("1", "10"), ("1", "1e3")] {
            let (before, after) = (numbered(before), numbered(after));
            assert_eq!(
                check_replacement(before.as_bytes(), after.as_bytes()),
                Ok(())
            );
        }
        // Metadata kept byte for byte is the original's, however its key is spelled.
        let escaped = br#"{"m\u0065tadata":{"name":"p"},"spec":{}}"#;
        assert_eq!(
            check_replacement(escaped, br#"{"m\u0065tadata":{"name":"p"}}"#),
            Ok(())
        );
    }

    #[test]
    fn text_a_client_cannot_decode_is_refused() {
        for bad in [
            &br#"{"kind":"Pod","metadata":{"name":"p""#[..],
            br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}} trailing"#,
            br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"x":"\q"}"#,
            br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"x":{"a":tru}}"#,
            br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"x":[1,]}"#,
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"\q":1}"#,
            br#"[{"name":"p","namespace":"ns","resourceVersion":"7"}]"#,
            b"",
            b"null",
            b"{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"resourceVersion\":\"7\"},\"x\":\"\xff\"}",
            b"{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"resourceVersion\":\"7\",\"labels\":{\"a\":\"\xc3\"}}}",
            b"{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"resourceVersion\":\"7\"},\"\xff\":1}",
            // After a kept field: the reader of the rest refuses what is not an object's rest.
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},}"#,
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}"#,
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}}}"#,
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"} "x":1}"#,
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},1:2}"#,
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"x":1x}"#,
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"x"}"#,
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"x":}"#,
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"x":1,"y":[1}}"#,
            br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"x":"a"b}"#,
            br#"{,"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}}"#,
        ] {
            let refused = check_replacement(POD, bad);
            assert!(refused.is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    /// Edits of a Pod, each a byte changed, added or taken out at random, are accepted
    /// exactly when the whole edit parses as one JSON object that keeps the Pod's identity.
    #[test]
    fn the_check_agrees_with_a_whole_parse_on_random_edits() {
        let pod = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","resourceVersion":"7","labels":{"a":"b\u00e9"}},"spec":{"containers":[{"name":"c","image":"i:1","ports":[{"containerPort":80}],"args":["-v=2","a\"b"]}],"priority":-1.5e3,"hostNetwork":false,"x":null},"status":{"phase":"Running"}}"#;
        let keeps_the_pod = |edit: &[u8]| {
            let Ok(serde_json::Value::Object(edit)) = serde_json::from_slice(edit) else {
                return false;
            };
            let meta = |key: &str| edit.get("metadata").and_then(|m| m.get(key)).cloned();
            meta("name") == Some("p".into())
                && meta("namespace") == Some("ns".into())
                && meta("resourceVersion") == Some("7".into())
        };
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        let mut random = |below: usize| rng.usize(..below);
        let bytes = b"{}[]\":,\\ \n0-1.e+truefalsnulx\xc3\xa9u";
        let (mut accepted, mut refused) = (0, 0);
        for _ in 0..20_000 {
            let mut edit = pod.to_vec();
            for _ in 0..1 + random(3) {
                let at = random(edit.len() + 1);
                let byte = bytes[random(bytes.len())];
                match random(3) {
                    0 if at < edit.len() => edit[at] = byte,
                    1 if at < edit.len() => drop(edit.remove(at)),
                    _ => edit.insert(at, byte),
                }
            }
            let checked = check_replacement(pod, &edit).is_ok();
            assert_eq!(
                checked,
                keeps_the_pod(&edit),
                "{}",
                String::from_utf8_lossy(&edit)
            );
            if checked { accepted += 1 } else { refused += 1 }
        }
        assert!(
            accepted > 1_000 && refused > 1_000,
            "{accepted} accepted, {refused} refused"
        );
    }

    /// Past the last byte a filter changed, the replacement reads as the original does, and
    /// is the original's text: it is not read, as the kept fields before the first change are
    /// not (here a control character the reader would refuse stands in the original's status).
    #[test]
    fn the_text_after_the_last_change_is_the_original_s_own_where_both_read_alike() {
        let original = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"resourceVersion\":\"7\"},\"spec\":{\"a\":[[0,1],{\"b\":2}],\"c\":[3,4,5,6,7,8,9,10,11,12,13,14,15,16]},\"x\":\"y\",\"status\":{\"s\":\"\u{1}\",\"n\":[17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39]}}";
        let edited = |from: &str, to: &str| original.replacen(from, to, 1);
        for accepted in [
            edited("[0,1]", "[9,1]"),
            edited("\"b\":2", "\"b\":{\"x\":[2]}"),
        ] {
            assert_eq!(
                check_replacement(original.as_bytes(), accepted.as_bytes()),
                Ok(()),
                "{accepted}"
            );
        }
        // The same end read with other brackets open is checked to the end, and refused; so
        // is what lies between two changes, though it reads as the original does.
        let two_changes = edited("[0,1]", "[9,1]").replacen("\"y\"", "\"\u{1}\"", 1);
        for refused in [
            edited("[[0,", "[{\"k\":0,"),
            edited("[0,1],", "[[0,1],"),
            two_changes,
        ] {
            assert!(
                check_replacement(original.as_bytes(), refused.as_bytes()).is_err(),
                "{refused}"
            );
        }
        // Without a change before it, that status is the replacement's to check.
        let valid = original.replace('\u{1}', "");
        let broken = edited("[0,1]", "[9,1]");
        assert!(check_replacement(valid.as_bytes(), broken.as_bytes()).is_err());
    }

    #[test]
    fn another_object_is_refused_naming_the_field() {
        let cases: [(&[u8], &str); 6] = [
            (br#"{"kind":"Pod"}"#, "metadata.name from \"p\" to \"\""),
            (
                br#"{"kind":"Pod","m\u0065tadata":{"name":"q","namespace":"ns","resourceVersion":"7"}}"#,
                "metadata.name from \"p\" to \"q\"",
            ),
            // Kept as it was, and then given again under another name.
            (
                br#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"metadata":{"name":"q","namespace":"ns","resourceVersion":"7"}}"#,
                "metadata.name from \"p\" to \"q\"",
            ),
            (
                br#"{"metadata":{"name":"q","namespace":"ns","resourceVersion":"7"}}"#,
                "metadata.name from \"p\" to \"q\"",
            ),
            (
                br#"{"metadata":{"name":"p","resourceVersion":"7"}}"#,
                "metadata.namespace from \"ns\" to \"\"",
            ),
            (
                br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"8"}}"#,
                "metadata.resourceVersion from \"7\" to \"8\"",
            ),
        ];
        for (replacement, message) in cases {
            let refused = check_replacement(POD, replacement).unwrap_err();
            assert!(refused.contains(message), "{refused}");
        }
    }
}
