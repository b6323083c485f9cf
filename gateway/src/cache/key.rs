//! Cache keys in YurtHub's layout: `<component>/<resource>.<version>.<group|core>/<namespace>/<name>`
//! (no namespace segment for cluster-scoped objects), and the key of a list set.

use std::fmt;

/// A resource as cached for one component.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    /// The component the objects were served to.
    pub component: String,
    /// Resource, plural and lowercase.
    pub resource: String,
    /// API version.
    pub version: String,
    /// API group; empty for the core group.
    pub group: String,
}

impl ResourceKey {
    /// `<component>/<resource>.<version>.<group|core>/`: the prefix of all its objects.
    pub fn prefix(&self) -> String {
        self.key_in("", "")
    }

    /// The prefix of its objects in `namespace` (all of them when empty).
    pub fn namespace_prefix(&self, namespace: &str) -> String {
        self.key_in(namespace, "")
    }

    /// The key of one object.
    pub fn object_key(&self, namespace: &str, name: &str) -> String {
        self.key_in(namespace, name)
    }

    /// The prefix, `namespace/` unless it is empty, then `name`: built in one allocation,
    /// as the writer builds one for every event it stores.
    fn key_in(&self, namespace: &str, name: &str) -> String {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        let parts: [&str; 11] = [
            &self.component,
            "/",
            &self.resource,
            ".",
            &self.version,
            ".",
            group,
            "/",
            namespace,
            if namespace.is_empty() { "" } else { "/" },
            name,
        ];
        let mut key = String::with_capacity(parts.iter().map(|part| part.len()).sum());
        parts.iter().for_each(|part| key.push_str(part));
        key
    }

    /// Reads `<component>/<resource>.<version>.<group|core>` (a trailing `/` is accepted).
    pub fn parse(text: &str) -> Option<ResourceKey> {
        let (component, gvr) = text.trim_end_matches('/').split_once('/')?;
        let mut parts = gvr.splitn(3, '.');
        let resource = parts.next()?;
        let version = parts.next()?;
        let group = parts.next()?;
        if component.is_empty() || resource.is_empty() || version.is_empty() || gvr.contains('/') {
            return None;
        }
        Some(ResourceKey {
            component: component.to_owned(),
            resource: resource.to_owned(),
            version: version.to_owned(),
            group: if group == "core" {
                String::new()
            } else {
                group.to_owned()
            },
        })
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix().trim_end_matches('/'))
    }
}

/// One list set: what one list request covers — a resource for a component, in a namespace
/// (or all), narrowed by selectors. A list replaces exactly its set.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SetKey {
    /// The resource.
    pub resource: ResourceKey,
    /// The namespace; empty for all namespaces or cluster-scoped resources.
    pub namespace: String,
    /// The label selector, normalised (terms sorted); empty when none.
    pub label_selector: String,
    /// The field selector, normalised; empty when none.
    pub field_selector: String,
}

/// Separates the parts of an encoded set key; it cannot occur in names or selectors as sent
/// by Kubernetes clients.
const SEP: char = '\u{1f}';

impl SetKey {
    /// A set key with its selectors normalised, so `b=2,a=1` and `a=1,b=2` name the same set.
    pub fn new(resource: ResourceKey, namespace: &str, labels: &str, fields: &str) -> SetKey {
        SetKey {
            resource,
            namespace: namespace.to_owned(),
            label_selector: normalise(labels),
            field_selector: normalise(fields),
        }
    }

    /// The key under which the set's metadata is stored.
    pub fn encode(&self) -> String {
        format!(
            "{}{SEP}{}{SEP}{}{SEP}{}",
            self.resource, self.namespace, self.label_selector, self.field_selector
        )
    }

    /// Reads an encoded set key.
    pub fn decode(text: &str) -> Option<SetKey> {
        let mut parts = text.split(SEP);
        let resource = ResourceKey::parse(parts.next()?)?;
        let key = SetKey {
            resource,
            namespace: parts.next()?.to_owned(),
            label_selector: parts.next()?.to_owned(),
            field_selector: parts.next()?.to_owned(),
        };
        parts.next().is_none().then_some(key)
    }

    /// The prefix every encoded set key of `resource` starts with.
    pub fn resource_prefix(resource: &ResourceKey) -> String {
        format!("{resource}{SEP}")
    }

    /// Whether this set holds every object a list of `namespace` with these selectors would
    /// return: same or wider namespace, and no selector or the very same one.
    pub fn covers(&self, namespace: &str, labels: &str, fields: &str) -> bool {
        (self.namespace.is_empty() || self.namespace == namespace)
            && (self.label_selector.is_empty() || self.label_selector == normalise(labels))
            && (self.field_selector.is_empty() || self.field_selector == normalise(fields))
    }
}

/// Sorts the comma-separated terms of a selector. Commas inside `in (a,b)` sets are kept
/// with their term.
fn normalise(selector: &str) -> String {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(selector[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(selector[start..].trim());
    terms.retain(|t| !t.is_empty());
    terms.sort_unstable();
    terms.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn services(component: &str) -> ResourceKey {
        ResourceKey {
            component: component.into(),
            resource: "services".into(),
            version: "v1".into(),
            group: String::new(),
        }
    }

    #[test]
    fn keys_follow_yurthubs_layout() {
        let key = services("kube-proxy");
        assert_eq!(key.prefix(), "kube-proxy/services.v1.core/");
        assert_eq!(
            key.object_key("default", "kubernetes"),
            "kube-proxy/services.v1.core/default/kubernetes"
        );
        assert_eq!(
            key.object_key("", "edge-1"),
            "kube-proxy/services.v1.core/edge-1"
        );
        assert_eq!(
            key.namespace_prefix("default"),
            "kube-proxy/services.v1.core/default/"
        );
        assert_eq!(key.namespace_prefix(""), key.prefix());
        let slices = ResourceKey {
            group: "discovery.k8s.io".into(),
            resource: "endpointslices".into(),
            version: "v1beta1".into(),
            component: "coredns".into(),
        };
        assert_eq!(
            slices.object_key("", "n"),
            "coredns/endpointslices.v1beta1.discovery.k8s.io/n"
        );
        assert_eq!(ResourceKey::parse(&slices.to_string()), Some(slices));
        assert_eq!(
            ResourceKey::parse("kubelet/pods.v1.core/"),
            Some(ResourceKey {
                component: "kubelet".into(),
                resource: "pods".into(),
                version: "v1".into(),
                group: String::new()
            })
        );
        assert_eq!(ResourceKey::parse("kubelet/pods"), None);
    }

    #[test]
    fn set_keys_round_trip_and_normalise_selectors() {
        let a = SetKey::new(services("kube-proxy"), "", "b=2, a in (x,y)", "");
        let b = SetKey::new(services("kube-proxy"), "", "a in (x,y),b=2", "");
        assert_eq!(a, b);
        assert_eq!(a.label_selector, "a in (x,y),b=2");
        assert_eq!(SetKey::decode(&a.encode()), Some(a.clone()));
        assert!(
            a.encode()
                .starts_with(&SetKey::resource_prefix(&a.resource))
        );
    }

    #[test]
    fn a_set_covers_narrower_or_equal_requests() {
        let all = SetKey::new(services("c"), "", "", "");
        assert!(all.covers("ns", "app=x", "spec.type=NodePort"));
        let selected = SetKey::new(services("c"), "ns", "app=x", "");
        assert!(selected.covers("ns", "app=x", ""));
        assert!(!selected.covers("other", "app=x", ""));
        assert!(!selected.covers("", "app=x", ""));
        assert!(!selected.covers("ns", "", ""));
    }
}
