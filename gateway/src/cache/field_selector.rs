//! Field selectors (`spec.nodeName=edge-1,metadata.namespace!=kube-system`), evaluated on an
//! object's JSON by field path, so a list with a field selector can be answered offline.
//! A field that is absent compares as the empty string, as in kube-apiserver.

use thiserror::Error;

/// A field selector that cannot be read.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid field selector term {0:?}: expected field=value, field==value or field!=value")]
pub struct FieldSelectorError(pub String);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    path: Vec<String>,
    equal: bool,
    value: String,
}

/// A parsed field selector; empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<Term>,
}

impl FieldSelector {
    /// Reads a selector; `\,`, `\=` and `\\` escape those characters in values.
    pub fn parse(text: &str) -> Result<FieldSelector, FieldSelectorError> {
        let mut terms = Vec::new();
        for raw in split_unescaped(text, ',') {
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((f, v)) = raw.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = raw.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = raw.split_once('=') {
                (f, true, v)
            } else {
                return Err(FieldSelectorError(raw.to_owned()));
            };
            let field = field.trim();
            if field.is_empty() {
                return Err(FieldSelectorError(raw.to_owned()));
            }
            terms.push(Term {
                path: field.split('.').map(str::to_owned).collect(),
                equal,
                value: unescape(value.trim()),
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Whether the selector has no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether `object` satisfies every term.
    pub fn matches(&self, object: &serde_json::Value) -> bool {
        self.terms.iter().all(|term| {
            let found = term
                .path
                .iter()
                .try_fold(object, |value, step| value.get(step))
                .map(field_text)
                .unwrap_or_default();
            (found == term.value) == term.equal
        })
    }
}

fn field_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn split_unescaped(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            c if c == separator && !escaped => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => escaped = false,
        }
    }
    parts.push(&text[start..]);
    parts
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn terms_compare_field_paths() {
        let pod = json!({"metadata": {"name": "p", "namespace": "kube-system"}, "spec": {"nodeName": "edge-1", "priority": 5}, "status": {"phase": "Running"}});
        let select = |s: &str| FieldSelector::parse(s).unwrap().matches(&pod);
        assert!(select("spec.nodeName=edge-1"));
        assert!(select("spec.nodeName==edge-1,status.phase!=Failed"));
        assert!(!select("spec.nodeName=edge-2"));
        assert!(!select("metadata.namespace!=kube-system"));
        assert!(select("spec.priority=5"));
        assert!(select("spec.missing="));
        assert!(select(""));
    }

    #[test]
    fn escapes_and_errors() {
        let cm = json!({"metadata": {"name": "a,b=c"}});
        assert!(
            FieldSelector::parse(r"metadata.name=a\,b\=c")
                .unwrap()
                .matches(&cm)
        );
        assert!(FieldSelector::parse("nonsense").is_err());
        assert!(FieldSelector::parse("=x").is_err());
    }
}
