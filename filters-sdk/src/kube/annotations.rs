//! Annotation and label values as Kubernetes and OpenYurt write them.

use crate::object::Object;

/// Whether the annotation `key` is exactly `"true"`, the one spelling OpenYurt honours.
pub fn flag(object: &Object, key: &str) -> bool {
    object.annotation(key) == Some("true")
}

/// The items of a comma-separated value (`foo, -bar,*`), trimmed, empty items left out.
pub fn comma_list(value: &str) -> impl Iterator<Item = &str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

/// The longest label value Kubernetes accepts.
const MAX_LABEL_VALUE: usize = 63;

/// Whether `value` is a valid non-empty label value (at most 63 characters: alphanumerics,
/// with `-`, `_` or `.` inside), and so safe to put into a label selector.
pub fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= MAX_LABEL_VALUE
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes.iter().all(inner)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn flags_are_true_only_when_spelled_true() {
        let object = |value: &str| {
            Object::from_value(json!({"metadata": {"annotations": {"a": value}}})).unwrap()
        };
        assert!(flag(&object("true"), "a"));
        for value in ["True", "yes", "1", " true", ""] {
            assert!(!flag(&object(value), "a"), "{value:?}");
        }
        assert!(!flag(&object("true"), "b"));
    }

    #[test]
    fn comma_lists_are_trimmed_and_skip_empty_items() {
        let items: Vec<&str> = comma_list(" foo, -bar ,,*, ").collect();
        assert_eq!(items, ["foo", "-bar", "*"]);
        assert_eq!(comma_list("").count(), 0);
        assert_eq!(comma_list(" , ").count(), 0);
    }

    #[test]
    fn label_values_follow_the_kubernetes_rules() {
        for good in ["a", "hangzhou", "pool-1", "a.b_c-d", &"x".repeat(63)] {
            assert!(is_label_value(good), "{good}");
        }
        let too_long = "x".repeat(64);
        for bad in [
            "",
            "-a",
            "a-",
            "a b",
            "a,b=c",
            "a/b",
            "pool)",
            too_long.as_str(),
        ] {
            assert!(!is_label_value(bad), "{bad}");
        }
    }
}
