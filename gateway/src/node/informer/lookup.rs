//! The informers as the filters' [`Lookup`]: the objects they keep, by kind, namespace and
//! name or label selector, and what names a change of each.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::Informers;
use crate::filter::{LabelSelector, Lookup};

impl Lookup for Informers {
    fn get(
        &self,
        group: &str,
        _version: &str,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Bytes> {
        let kind = self.kind(group, resource)?;
        // As `key` below names the objects the informers keep.
        let namespace = match kind.namespaced {
            true => namespace.unwrap_or_default(),
            false => "",
        };
        kind.objects.get(&format!("{namespace}/{name}"))
    }

    fn list(
        &self,
        group: &str,
        _version: &str,
        resource: &str,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Vec<Bytes> {
        let Some(kind) = self.kind(group, resource) else {
            return Vec::new();
        };
        kind.objects.list(namespace, selector)
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    fn feed(&self, group: &str, resource: &str) -> Option<u32> {
        self.index(group, resource)
            .and_then(|i| u32::try_from(i).ok())
    }

    fn key(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<(u32, String)> {
        let index = self.index(group, resource)?;
        // As `key` below names the objects the informers announce.
        let namespace = match self.kinds[index].namespaced {
            true => namespace.unwrap_or_default(),
            false => "",
        };
        Some((u32::try_from(index).ok()?, format!("{namespace}/{name}")))
    }
}
