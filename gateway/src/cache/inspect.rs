//! What an operator asks of the cache: which sets it holds (component, resource, scope,
//! selectors, objects, synced resourceVersion), and one object by name. Served by the hub
//! while the gateway runs, and read from the file by `edgegate cache` when it does not.

use bytes::Bytes;
use serde::Serialize;

use super::key::ResourceKey;
use super::selectors::Selectors;
use super::store::{History, Store, StoreError};

/// One cached list set, as `edgegate cache ls` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SetSummary {
    /// The component it was served to.
    pub component: String,
    /// `resource.version.group`, group `core` for the core group.
    pub resource: String,
    /// The namespace; empty for all.
    pub namespace: String,
    /// The label selector; empty for none.
    pub label_selector: String,
    /// The field selector; empty for none.
    pub field_selector: String,
    /// Objects the set holds now.
    pub objects: u64,
    /// The resourceVersion it is synced to.
    pub resource_version: String,
    /// When its list was committed (unix seconds).
    pub committed_at: u64,
}

/// Every cached set, with the objects each holds counted.
pub fn summary(store: &dyn Store) -> Result<Vec<SetSummary>, StoreError> {
    let mut sets = Vec::new();
    for (set, meta) in store.sets("")? {
        let selection = Selectors::of_set(&set).unwrap_or_default();
        let departed: std::collections::HashMap<String, History> =
            store.history(&set)?.into_iter().collect();
        let mut objects = 0;
        for entry in store.scan(&set.resource.namespace_prefix(&set.namespace))? {
            let (key, object) = entry?;
            let left = departed.get(&key).is_some_and(|d| d.hides(&object));
            objects += u64::from(selection.matches(&object) && !left);
        }
        let prefix = set.resource.prefix();
        sets.push(SetSummary {
            component: set.resource.component.clone(),
            resource: prefix
                .trim_end_matches('/')
                .split_once('/')
                .map_or_else(String::new, |(_, r)| r.to_owned()),
            namespace: set.namespace,
            label_selector: set.label_selector,
            field_selector: set.field_selector,
            objects,
            resource_version: meta.resource_version,
            committed_at: meta.committed_at,
        });
    }
    Ok(sets)
}

/// One cached object of `component`: `resource` is `services`, `services.v1` or
/// `endpointslices.v1beta1.discovery.k8s.io`; `name` is `namespace/name` or `name`. When the
/// resource leaves version or group open, any cached one that holds the object answers.
pub fn object(
    store: &dyn Store,
    component: &str,
    resource: &str,
    name: &str,
) -> Result<Option<Bytes>, StoreError> {
    let (namespace, name) = name.split_once('/').unwrap_or(("", name));
    let mut parts = resource.splitn(3, '.');
    let resource = parts.next().unwrap_or_default();
    let (version, group) = (parts.next(), parts.next());
    for (set, _) in store.sets(&format!("{component}/{resource}."))? {
        let key: &ResourceKey = &set.resource;
        let group_name = if key.group.is_empty() {
            "core"
        } else {
            key.group.as_str()
        };
        if version.is_some_and(|v| v != key.version) || group.is_some_and(|g| g != group_name) {
            continue;
        }
        if let Some(object) = store.get(&key.object_key(namespace, name))? {
            return Ok(Some(object));
        }
    }
    // Objects cached from single gets have no set; try the key as given.
    if let (Some(version), Some(group)) = (version, group) {
        let key = format!("{component}/{resource}.{version}.{group}/");
        let key = if namespace.is_empty() {
            format!("{key}{name}")
        } else {
            format!("{key}{namespace}/{name}")
        };
        return store.get(&key);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::StoreWriter;
    use crate::cache::key::SetKey;
    use crate::cache::redb_store::RedbStore;
    use crate::cache::store::{SetMeta, WriteOp};

    #[test]
    fn sets_are_summarised_and_objects_found_by_short_names() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(dir.path()).unwrap();
        let services = ResourceKey {
            component: "kube-proxy".into(),
            resource: "services".into(),
            version: "v1".into(),
            group: String::new(),
        };
        let object = Bytes::from_static(
            br#"{"metadata":{"name":"web","namespace":"a","resourceVersion":"3"}}"#,
        );
        store
            .apply(
                &[
                    WriteOp::Stage {
                        list: 1,
                        key: services.object_key("a", "web"),
                        object: object.clone(),
                    },
                    WriteOp::Commit {
                        list: 1,
                        set: SetKey::new(services, "", "", ""),
                        meta: SetMeta {
                            resource_version: "3".into(),
                            ..SetMeta::default()
                        },
                    },
                ],
                true,
            )
            .unwrap();
        let sets = summary(&store).unwrap();
        assert_eq!(sets.len(), 1);
        assert_eq!(
            (
                sets[0].resource.as_str(),
                sets[0].objects,
                sets[0].resource_version.as_str()
            ),
            ("services.v1.core", 1, "3")
        );
        assert_eq!(
            super::object(&store, "kube-proxy", "services", "a/web").unwrap(),
            Some(object.clone())
        );
        assert_eq!(
            super::object(&store, "kube-proxy", "services.v1.core", "a/web").unwrap(),
            Some(object)
        );
        assert_eq!(
            super::object(&store, "kube-proxy", "services.v2", "a/web").unwrap(),
            None
        );
        assert_eq!(
            super::object(&store, "kubelet", "services", "a/web").unwrap(),
            None
        );
    }
}
