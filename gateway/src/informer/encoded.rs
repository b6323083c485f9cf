//! The JSON of the informers' objects, encoded once per object version: a watch of endpoint
//! slices looks the same Service up for event after event, and encoding a Service costs more
//! than the filter's whole decision.
//!
//! A reflector store replaces an object's `Arc` on every change, so an entry is keyed by the
//! address of the `Arc` it was encoded from and holds a `Weak` to it: while the entry lives
//! that allocation cannot be reused, and once the store lets go of the version the entry is
//! stale and is pruned.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use kube::api::DynamicObject;

/// Entries beyond the live ones that may pile up before stale ones are pruned.
const SLACK: usize = 64;

/// Encoded objects of one kind.
#[derive(Default)]
pub(super) struct Encoded {
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_address: HashMap<usize, (Weak<DynamicObject>, Bytes)>,
    /// Pruning runs when the map grows past this.
    prune_at: usize,
}

impl Encoded {
    /// The JSON of `object`, encoded now only if this version was not encoded before.
    pub(super) fn get(&self, object: &Arc<DynamicObject>) -> Option<Bytes> {
        let address = Arc::as_ptr(object).addr();
        if let Some((_, bytes)) = self.lock().by_address.get(&address) {
            return Some(bytes.clone());
        }
        let bytes = Bytes::from(serde_json::to_vec(&**object).ok()?);
        let mut entries = self.lock();
        if entries.by_address.len() >= entries.prune_at {
            entries
                .by_address
                .retain(|_, (version, _)| version.strong_count() > 0);
            entries.prune_at = 2 * entries.by_address.len() + SLACK;
        }
        entries
            .by_address
            .insert(address, (Arc::downgrade(object), bytes.clone()));
        Some(bytes)
    }

    /// How many versions are held (live or not yet pruned).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().by_address.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // The map stays consistent whatever a panicking holder did: take it back.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, GroupVersionKind};

    use super::*;

    fn service(version: &str) -> Arc<DynamicObject> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Service"));
        let mut object = DynamicObject::new("web", &resource).within("default");
        object.metadata.resource_version = Some(version.into());
        Arc::new(object)
    }

    #[test]
    fn a_version_is_encoded_once_and_a_new_version_anew() {
        let encoded = Encoded::default();
        let first = service("1");
        let bytes = encoded.get(&first).unwrap();
        assert!(std::ptr::eq(
            bytes.as_ptr(),
            encoded.get(&first).unwrap().as_ptr()
        ));
        let second = service("2");
        let again = encoded.get(&second).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&again).unwrap();
        assert_eq!(value["metadata"]["resourceVersion"], "2");
        assert_eq!(encoded.len(), 2);
    }

    #[test]
    fn versions_the_store_let_go_of_are_pruned() {
        let encoded = Encoded::default();
        let live = service("0");
        encoded.get(&live);
        for version in 1..1000 {
            encoded.get(&service(&version.to_string()));
        }
        assert!(encoded.len() <= 2 + SLACK, "{} held", encoded.len());
        assert!(
            encoded
                .lock()
                .by_address
                .values()
                .any(|(v, _)| v.strong_count() > 0)
        );
    }
}
