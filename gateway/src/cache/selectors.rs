//! Which stored objects a list with selectors returns, and which members a committed list
//! replaces: the same question, asked with the same code by every store.

use edgegate_filter_sdk::selector::LabelSelector;

use super::field_selector::FieldSelector;
use super::key::SetKey;
use crate::stream;

/// A label and a field selector, parsed once.
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    labels: Option<LabelSelector>,
    fields: FieldSelector,
}

/// A selector in a request cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("invalid {kind} selector {text:?}")]
pub struct SelectorError {
    kind: &'static str,
    text: String,
}

impl Selectors {
    /// Parses a label and a field selector (either may be empty).
    pub fn new(labels: &str, fields: &str) -> Result<Selectors, SelectorError> {
        let labels = if labels.trim().is_empty() {
            None
        } else {
            Some(LabelSelector::parse(labels).map_err(|_| SelectorError {
                kind: "label",
                text: labels.to_owned(),
            })?)
        };
        let fields = FieldSelector::parse(fields).map_err(|_| SelectorError {
            kind: "field",
            text: fields.to_owned(),
        })?;
        Ok(Selectors { labels, fields })
    }

    /// The selection of a set's selectors.
    pub fn of_set(set: &SetKey) -> Result<Selectors, SelectorError> {
        Selectors::new(&set.label_selector, &set.field_selector)
    }

    /// Whether the selection selects everything.
    pub fn is_everything(&self) -> bool {
        self.labels.is_none() && self.fields.is_empty()
    }

    /// Whether a stored object is selected; an object that cannot be read is not.
    pub fn matches(&self, object: &[u8]) -> bool {
        if self.is_everything() {
            return true;
        }
        if let Some(labels) = &self.labels {
            let Ok(of_object) = stream::labels(object) else {
                return false;
            };
            if !labels.matches_with(|key| of_object.get(key).map(|v| v.as_ref())) {
                return false;
            }
        }
        if !self.fields.is_empty() {
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(object) else {
                return false;
            };
            return self.fields.matches(&value);
        }
        true
    }
}
