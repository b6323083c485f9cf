//! What pruning one object or one batch looks up in the gateway's view, each thing once: a
//! list of a thousand slices asks for its Services and its pool's members once, not a
//! thousand times.

use std::collections::{BTreeMap, BTreeSet};

use edgegate_filter_sdk::kube::service::{service_name, service_of};
use edgegate_filter_sdk::kube::{EndpointsKind, Topology, pool};
use edgegate_filter_sdk::{Level, Object, host};

/// Lookups made for one call, reused by the objects of a batch.
#[derive(Default)]
pub(crate) struct Lookups {
    /// The topology of each Service seen, by namespace and name; `None` when the Service is
    /// unknown or not annotated with a known topology.
    topologies: BTreeMap<(String, String), Option<Topology>>,
    /// The members of this node's pool, once asked for (a call serves one node).
    members: Option<Option<BTreeSet<String>>>,
    /// Whether a warning was logged already, so a batch logs a problem once.
    warned: bool,
}

impl Lookups {
    /// The topology the Service of `object` asks for.
    pub(crate) fn topology(&mut self, kind: EndpointsKind, object: &Object) -> Option<Topology> {
        let key = (
            object.namespace()?.to_owned(),
            service_name(kind, object)?.to_owned(),
        );
        *self
            .topologies
            .entry(key)
            .or_insert_with(|| service_of(kind, object).and_then(|service| Topology::of(&service)))
    }

    /// The nodes of `pool`, if the gateway knows any.
    pub(crate) fn members(&mut self, pool: &str) -> Option<&BTreeSet<String>> {
        self.members
            .get_or_insert_with(|| pool::members(pool))
            .as_ref()
    }

    /// Logs a warning, unless this call has logged one already.
    pub(crate) fn warn_once(&mut self, message: &str) {
        if !self.warned {
            self.warned = true;
            host::log(Level::Warn, message);
        }
    }
}
