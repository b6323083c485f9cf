//! One kind's objects as lookups read them: each object's labels (what a selector matches)
//! and its JSON (what a filter is handed), encoded once when the informer applies the
//! version, and nothing else. A tree of the object's fields (kube's `DynamicObject`, what
//! a reflector store keeps) costs several times its JSON (measured: benches/HISTORY.md,
//! "Measurements behind choices in the code").
//!
//! Objects are keyed `namespace/name` (`/name` for a kind without namespaces), as the
//! informers announce their changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use edgegate_filter_sdk::LabelSelector;

/// One object: its labels and its JSON.
struct Entry {
    labels: BTreeMap<String, String>,
    json: Bytes,
}

/// The objects of one kind, written by its informer and read by lookups.
#[derive(Default)]
pub(super) struct Objects {
    by_key: RwLock<HashMap<String, Entry>>,
}

/// A listing being gathered: the objects of a (re-)list, put in place whole when it is done.
#[derive(Default)]
pub(super) struct Listing {
    by_key: HashMap<String, Entry>,
}

impl Listing {
    /// Adds an object of the list.
    pub(super) fn insert(&mut self, key: String, labels: BTreeMap<String, String>, json: Bytes) {
        self.by_key.insert(key, Entry { labels, json });
    }
}

impl Objects {
    /// The JSON of the object `key`.
    pub(super) fn get(&self, key: &str) -> Option<Bytes> {
        self.read().get(key).map(|entry| entry.json.clone())
    }

    /// A label of the object `key`, if the object is known and has it.
    pub(super) fn label(&self, key: &str, label: &str) -> Option<String> {
        self.read().get(key)?.labels.get(label).cloned()
    }

    /// The JSON of the objects in `namespace` (any, for `None`) whose labels `selector`
    /// matches.
    pub(super) fn list(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Bytes> {
        self.read()
            .iter()
            .filter(|(key, _)| {
                namespace.is_none_or(|ns| {
                    key.strip_prefix(ns)
                        .is_some_and(|rest| rest.starts_with('/'))
                })
            })
            .filter(|(_, entry)| {
                selector.matches_with(|key| entry.labels.get(key).map(String::as_str))
            })
            .map(|(_, entry)| entry.json.clone())
            .collect()
    }

    /// Puts a new version of the object `key` in place.
    pub(super) fn apply(&self, key: String, labels: BTreeMap<String, String>, json: Bytes) {
        self.write().insert(key, Entry { labels, json });
    }

    /// Forgets the object `key`.
    pub(super) fn delete(&self, key: &str) {
        self.write().remove(key);
    }

    /// Replaces every object with those of a (re-)list.
    pub(super) fn replace(&self, listing: Listing) {
        *self.write() = listing.by_key;
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<String, Entry>> {
        // Every write is one map operation: a panicking holder leaves the map whole.
        self.by_key
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<String, Entry>> {
        self.by_key
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn selector(text: &str) -> LabelSelector {
        LabelSelector::parse(text).unwrap()
    }

    #[test]
    fn lookups_read_what_was_applied_by_key_namespace_and_labels() {
        let objects = Objects::default();
        objects.apply("default/web".into(), labels(&[("app", "web")]), "w".into());
        objects.apply("default/db".into(), labels(&[("app", "db")]), "d".into());
        // A namespace whose name begins another's is not that one.
        objects.apply(
            "default2/web".into(),
            labels(&[("app", "web")]),
            "w2".into(),
        );

        assert_eq!(objects.get("default/web").as_deref(), Some(&b"w"[..]));
        assert_eq!(objects.get("other/web"), None);
        assert_eq!(objects.label("default/db", "app").as_deref(), Some("db"));
        assert_eq!(objects.label("default/db", "tier"), None);

        let mut all = objects.list(None, &selector("app=web"));
        all.sort();
        assert_eq!(all, [Bytes::from("w"), Bytes::from("w2")]);
        assert_eq!(
            objects.list(Some("default"), &selector("")).len(),
            2,
            "the two of default, not default2's"
        );

        objects.apply("default/web".into(), labels(&[("app", "api")]), "w'".into());
        objects.delete("default/db");
        assert_eq!(
            objects.list(Some("default"), &selector("app=web")),
            Vec::<Bytes>::new()
        );
        assert_eq!(objects.get("default/web").as_deref(), Some(&b"w'"[..]));
        assert_eq!(objects.get("default/db"), None);
    }

    #[test]
    fn a_relist_replaces_every_object() {
        let objects = Objects::default();
        objects.apply("default/gone".into(), BTreeMap::new(), "g".into());
        let mut listing = Listing::default();
        listing.insert("default/new".into(), BTreeMap::new(), "n".into());
        objects.replace(listing);
        assert_eq!(objects.get("default/gone"), None);
        assert_eq!(objects.get("default/new").as_deref(), Some(&b"n"[..]));
    }
}
