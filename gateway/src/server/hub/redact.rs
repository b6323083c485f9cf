//! What `/v1/cache/object` shows of a cached Secret: its keys, not their values. Loopback is
//! not the node's own: every pod with `hostNetwork` reaches it, and such a pod must not read
//! the Secrets the node's components cached (a service account token, a registry password)
//! through the hub. An operator who needs a value reads it with the node's own credentials.

use bytes::Bytes;
use serde_json::Value;

/// What a redacted value reads.
pub(super) const REDACTED: &str = "<redacted>";

/// The annotation `kubectl apply` keeps the whole applied object in, Secret values included.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether the cached object of `resource` (as `/v1/cache/object` names it: `secrets`,
/// `secrets.v1`, `secrets.v1.core`) or `object` is a Secret.
pub(super) fn is_secret(resource: &str, object: &[u8]) -> bool {
    let plural = resource.split('.').next().unwrap_or_default();
    plural == "secrets" || kind(object).as_deref() == Some("Secret")
}

/// `object` with every value of `data` and `stringData` and the last-applied annotation
/// replaced by [`REDACTED`]; `None` when it is not a JSON object (and so cannot be shown).
/// Fields come back sorted by name, not in the order they were stored.
pub(super) fn redact(object: &[u8]) -> Option<Bytes> {
    let mut object: Value = serde_json::from_slice(object).ok()?;
    let fields = object.as_object_mut()?;
    for key in ["data", "stringData"] {
        if let Some(Value::Object(values)) = fields.get_mut(key) {
            values
                .values_mut()
                .for_each(|value| *value = Value::from(REDACTED));
        }
    }
    if let Some(annotation) = fields
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(|a| a.get_mut(LAST_APPLIED))
    {
        *annotation = Value::from(REDACTED);
    }
    serde_json::to_vec(&object).ok().map(Bytes::from)
}

/// The object's `kind`, when it has one.
fn kind(object: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Kind {
        kind: Option<String>,
    }
    serde_json::from_slice::<Kind>(object).ok()?.kind
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"kube-system","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"token\":\"c2VjcmV0\"}}","team":"edge"}},"data":{"token":"c2VjcmV0","ca.crt":"Y2E="},"stringData":{"password":"hunter2"},"type":"Opaque"}"#;

    #[test]
    fn a_secret_keeps_its_keys_and_loses_its_values() {
        let redacted = redact(SECRET.as_bytes()).expect("redacted");
        let text = std::str::from_utf8(&redacted).expect("UTF-8");
        for value in ["c2VjcmV0", "Y2E=", "hunter2"] {
            assert!(!text.contains(value), "{value} shown: {text}");
        }
        let object: Value = serde_json::from_slice(&redacted).expect("JSON");
        assert_eq!(object["data"]["token"], REDACTED);
        assert_eq!(object["data"]["ca.crt"], REDACTED);
        assert_eq!(object["stringData"]["password"], REDACTED);
        assert_eq!(object["metadata"]["annotations"][LAST_APPLIED], REDACTED);
        assert_eq!(object["metadata"]["annotations"]["team"], "edge");
        assert_eq!(object["metadata"]["name"], "s");
        assert_eq!(object["type"], "Opaque");
    }

    #[test]
    fn secrets_are_known_by_resource_or_kind() {
        let listed_item = br#"{"metadata":{"name":"s"},"data":{"k":"dg=="}}"#;
        for resource in ["secrets", "secrets.v1", "secrets.v1.core"] {
            assert!(is_secret(resource, listed_item), "{resource}");
        }
        assert!(is_secret("whatever", SECRET.as_bytes()));
        assert!(!is_secret(
            "configmaps",
            br#"{"kind":"ConfigMap","data":{}}"#
        ));
        assert!(!is_secret("services.v1", listed_item));
    }

    #[test]
    fn what_is_not_an_object_is_not_shown() {
        assert!(redact(b"[1]").is_none());
        assert!(redact(b"not json").is_none());
    }
}
