//! What a filter's replacement must be before it goes to the client and the cache: a JSON
//! object (checked whole, so a client never receives text it cannot decode) that is still
//! the object it replaces (same name, namespace and resourceVersion, so watch state and
//! cache keys stay those of the object the upstream sent).

use std::borrow::Cow;

use crate::stream::Meta;

/// Why a replacement is refused, for the failure's message; `Ok` when it may be sent.
pub(crate) fn check_replacement(original: &[u8], replacement: &[u8]) -> Result<(), String> {
    if replacement.trim_ascii_start().first() != Some(&b'{') {
        return Err("replaced the object with something that is not a JSON object".into());
    }
    let Ok(replaced) = Meta::parse(replacement) else {
        return Err("replaced the object with bytes that are not valid JSON".into());
    };
    // An original the gateway cannot read has nothing to keep the replacement to.
    let Ok(original) = Meta::parse_checked(original) else {
        return Ok(());
    };
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
    }

    #[test]
    fn text_a_client_cannot_decode_is_refused() {
        for bad in [
            &br#"{"kind":"Pod","metadata":{"name":"p""#[..],
            br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}} trailing"#,
            br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"7"},"x":"\q"}"#,
            br#"[{"name":"p","namespace":"ns","resourceVersion":"7"}]"#,
            b"",
            b"null",
        ] {
            let refused = check_replacement(POD, bad);
            assert!(refused.is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn another_object_is_refused_naming_the_field() {
        let cases: [(&[u8], &str); 3] = [
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
