//! What a filter's replacement must be before it goes to the client and the cache: a JSON
//! object that is still the object it replaces (same name, namespace and resourceVersion,
//! so watch state and cache keys stay those of the object the upstream sent).
//!
//! Only what the filter changed is read: a top-level field the original has byte for byte
//! is as good as the original's, which the framer or the cache writer checks; every other
//! field is parsed, so a client never receives text it cannot decode.

use std::borrow::Cow;

use edgegate_filter_sdk::Object;
use serde::de::IgnoredAny;

use crate::stream::Meta;

/// Why a replacement is refused, for the failure's message; `Ok` when it may be sent.
pub fn check_replacement(original: &[u8], replacement: &[u8]) -> Result<(), String> {
    let not_json = || "replaced the object with bytes that are not a JSON object".to_owned();
    // An original the gateway cannot read has nothing to keep the replacement to.
    let names_the_original = |replaced: &Meta| match Meta::parse_checked(original) {
        Ok(original) => same_object(&original, replaced),
        Err(_) => Ok(()),
    };
    let fields = Object::compare_fields(original, replacement).ok_or_else(not_json)?;
    let mut has_metadata = false;
    for field in fields {
        let key = &replacement[field.key];
        if field.unchanged {
            has_metadata |= is_metadata(key);
            continue;
        }
        // `serde_json` skips strings it does not build without checking their UTF-8, so
        // the text is checked first, and then read as text.
        let text = |bytes| std::str::from_utf8(bytes).map_err(|_| not_json());
        let (key, value) = (text(key)?, text(&replacement[field.value])?);
        let name: Cow<str> = serde_json::from_str(key).map_err(|_| not_json())?;
        if name == "metadata" {
            has_metadata = true;
            let replaced = serde_json::from_str::<Meta>(value).map_err(|_| not_json())?;
            names_the_original(&replaced)?;
        } else {
            serde_json::from_str::<IgnoredAny>(value).map_err(|_| not_json())?;
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
        ] {
            let refused = check_replacement(POD, bad);
            assert!(refused.is_err(), "{}", String::from_utf8_lossy(bad));
        }
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
