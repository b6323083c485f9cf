//! The node's writes as kube-apiserver reads them: a patch in each of its media types, or
//! a whole object (an update), turned into the object that results.

use serde_json::Value;

use super::strategic;

/// How a write's body changes the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// `application/strategic-merge-patch+json`: kubelet's patches of pod and node status.
    Strategic,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    JsonPatch,
    /// `application/apply-patch+yaml`: server-side apply, which needs the cloud.
    Apply,
    /// A whole object (an update).
    Replace,
}

/// Why a write cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch's media type is none kube-apiserver takes.
    #[error("{0:?} is not a patch type (strategic merge, JSON merge and JSON patches are)")]
    Media(String),
    /// The body is not the JSON its type needs.
    #[error("the patch cannot be read: {0}")]
    Body(String),
    /// The patch does not apply to the object (a failed `test`, a path that is not there).
    #[error("the patch does not apply: {0}")]
    Apply(String),
}

impl Change {
    /// The change a patch of media type `content_type` makes.
    pub fn of_patch(content_type: &str) -> Result<Change, PatchError> {
        let media = super::media::media_type(content_type);
        match media.as_str() {
            "application/strategic-merge-patch+json" => Ok(Change::Strategic),
            "application/merge-patch+json" => Ok(Change::Merge),
            "application/json-patch+json" => Ok(Change::JsonPatch),
            "application/apply-patch+yaml" => Ok(Change::Apply),
            _ => Err(PatchError::Media(media)),
        }
    }

    /// Applies `body` to `object` (the object as the cache holds it).
    pub fn apply(self, object: &mut Value, body: &[u8]) -> Result<(), PatchError> {
        let read = |body: &[u8]| -> Result<Value, PatchError> {
            let text = std::str::from_utf8(body).map_err(|e| PatchError::Body(e.to_string()))?;
            serde_json::from_str(text).map_err(|e| PatchError::Body(e.to_string()))
        };
        match self {
            Change::Strategic => strategic::apply(object, &read(body)?)
                .map_err(|error| PatchError::Apply(error.to_string())),
            Change::Merge => {
                let patch = read(body)?;
                if !patch.is_object() {
                    return Err(PatchError::Body(
                        "a JSON merge patch must be an object".into(),
                    ));
                }
                json_patch::merge(object, &patch);
                Ok(())
            }
            Change::JsonPatch => {
                let patch: json_patch::Patch = serde_json::from_value(read(body)?)
                    .map_err(|e| PatchError::Body(e.to_string()))?;
                json_patch::patch(object, &patch.0).map_err(|e| PatchError::Apply(e.to_string()))
            }
            Change::Replace => {
                let whole = read(body)?;
                if !whole.is_object() {
                    return Err(PatchError::Body("the body is not an object".into()));
                }
                *object = whole;
                Ok(())
            }
            Change::Apply => Err(PatchError::Media("application/apply-patch+yaml".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "labels": {"a": "1"}}, "status": {"phase": "Pending"}})
    }

    #[test]
    fn each_patch_type_changes_the_object_as_kube_apiserver_does() {
        let mut merged = pod();
        Change::Merge
            .apply(
                &mut merged,
                br#"{"metadata":{"labels":{"a":null,"b":"2"}},"status":{"phase":"Running"}}"#,
            )
            .unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(merged["status"]["phase"], "Running");

        let mut patched = pod();
        Change::JsonPatch
            .apply(&mut patched, br#"[{"op":"test","path":"/status/phase","value":"Pending"},{"op":"replace","path":"/status/phase","value":"Running"}]"#)
            .unwrap();
        assert_eq!(patched["status"]["phase"], "Running");
        let failed = Change::JsonPatch.apply(
            &mut patched,
            br#"[{"op":"test","path":"/status/phase","value":"Pending"}]"#,
        );
        assert!(matches!(failed, Err(PatchError::Apply(_))), "{failed:?}");

        let mut strategic = pod();
        Change::Strategic
            .apply(&mut strategic, br#"{"status":{"phase":"Running"}}"#)
            .unwrap();
        assert_eq!(strategic["status"]["phase"], "Running");
        assert_eq!(strategic["metadata"]["labels"]["a"], "1");
    }

    #[test]
    fn media_types_are_read_as_kube_apiserver_reads_them() {
        assert_eq!(
            Change::of_patch("application/strategic-merge-patch+json; charset=utf-8").unwrap(),
            Change::Strategic
        );
        assert_eq!(
            Change::of_patch("application/apply-patch+yaml").unwrap(),
            Change::Apply
        );
        assert!(Change::of_patch("application/json").is_err());
        let mut object = pod();
        assert!(Change::Merge.apply(&mut object, b"[1]").is_err());
        assert!(Change::Merge.apply(&mut object, b"{\"a\":").is_err());
        assert!(Change::Apply.apply(&mut object, b"{}").is_err());
        assert_eq!(object, pod(), "a refused patch changes nothing");
    }
}
