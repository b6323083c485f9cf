//! A generation of the filter chain: the loaded filters in their deterministic order
//! (priority, then name), and which of them apply to a request.

use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;

use edgegate_filter_sdk::Verb;

use super::session::Session;
use crate::filter::error::FilterError;
use crate::filter::loading::loaded_filter::LoadedFilter;
use crate::filter::loading::loader::load_one;
use crate::filter::lookup::Lookup;
use crate::filter::runtime::bindings::Context;
use crate::request::RequestInfo;

/// What filters are told of the node the gateway serves: its name, and its pool, which can
/// change while the gateway runs (it may come from the node's label).
#[derive(Debug)]
pub struct NodeFacts {
    name: String,
    pool: arc_swap::ArcSwapOption<String>,
}

impl NodeFacts {
    /// Facts of node `name` in `pool`.
    pub fn new(name: String, pool: Option<String>) -> Arc<NodeFacts> {
        Arc::new(NodeFacts {
            name,
            pool: arc_swap::ArcSwapOption::from(pool.map(Arc::new)),
        })
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's pool now.
    pub fn pool(&self) -> Option<String> {
        self.pool.load().as_deref().cloned()
    }

    /// Records a new pool; true when it changed.
    pub(crate) fn set_pool(&self, pool: Option<String>) -> bool {
        let changed = self.pool() != pool;
        if changed {
            self.pool.store(pool.map(Arc::new));
        }
        changed
    }
}

/// One generation of the chain; responses hold it (by `Arc`) for their whole life.
pub struct Generation {
    number: u64,
    filters: Vec<Arc<LoadedFilter>>,
    node: Arc<NodeFacts>,
}

impl Generation {
    /// A generation of `filters`, put in chain order.
    pub(crate) fn new(
        number: u64,
        mut filters: Vec<Arc<LoadedFilter>>,
        node: Arc<NodeFacts>,
    ) -> Generation {
        filters.sort_by(|a, b| {
            (a.effective.priority, &*a.name).cmp(&(b.effective.priority, &*b.name))
        });
        Generation {
            number,
            filters,
            node,
        }
    }

    /// One filter loaded from its bytes and its `NAME.toml` text as the gateway would, in a
    /// generation (number 1) and a runtime of its own: what `edgegate filter test` runs and
    /// the benchmarks measure. Compiled code is cached under `compiled_cache` when given.
    pub fn single(
        name: &str,
        wasm: &[u8],
        toml: Option<&str>,
        node: Arc<NodeFacts>,
        lookup: Arc<dyn Lookup>,
        compiled_cache: Option<&Path>,
    ) -> Result<Generation, FilterError> {
        let filter = load_one(name, wasm, toml, lookup, compiled_cache)?;
        Ok(Generation::new(1, vec![Arc::new(filter)], node))
    }

    /// The generation's number (0 is the empty chain the gateway starts with).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The names of its filters, in chain order.
    pub fn names(&self) -> Vec<&str> {
        self.filters.iter().map(|f| &*f.name).collect()
    }

    /// The filters, in chain order.
    pub(crate) fn filters(&self) -> &[Arc<LoadedFilter>] {
        &self.filters
    }

    /// Whether some filter applies to the response of a request of `component`.
    pub fn applies(&self, info: &RequestInfo, component: &str) -> bool {
        filtered_verb(info)
            .is_some_and(|verb| self.applicable(info, verb, component).next().is_some())
    }

    /// The filtering of one response, or `None` when no filter applies to it.
    pub fn session(&self, info: &RequestInfo, component: &str) -> Option<Session> {
        let verb = filtered_verb(info)?;
        let steps: Vec<Arc<LoadedFilter>> =
            self.applicable(info, verb, component).cloned().collect();
        if steps.is_empty() {
            return None;
        }
        let ctx = Context {
            component: component.to_owned(),
            verb: verb.into(),
            group: info.api_group.clone(),
            version: info.api_version.clone(),
            resource: info.resource.clone(),
            namespace: (!info.namespace.is_empty()).then(|| info.namespace.clone()),
            node_name: self.node.name().to_owned(),
            node_pool: self.node.pool(),
        };
        Some(Session::new(ctx, steps))
    }

    /// The identity of the filters that apply to a request (names, code, settings,
    /// config) and of the node facts they see, so an open watch can tell whether a new
    /// generation or a new node pool changes its filtering.
    pub fn fingerprint(&self, info: &RequestInfo, component: &str) -> u64 {
        let mut hasher = std::hash::DefaultHasher::new();
        if let Some(verb) = filtered_verb(info) {
            let mut any = false;
            for filter in self.applicable(info, verb, component) {
                filter.identity.hash(&mut hasher);
                any = true;
            }
            if any {
                self.node.pool().hash(&mut hasher);
            }
        }
        hasher.finish()
    }

    fn applicable<'a>(
        &'a self,
        info: &'a RequestInfo,
        verb: Verb,
        component: &'a str,
    ) -> impl Iterator<Item = &'a Arc<LoadedFilter>> {
        self.filters
            .iter()
            .filter(move |f| f.applies(&info.api_group, &info.resource, verb, component))
    }
}

/// The verb filters know a request by; `None` for requests whose bodies are not the
/// resource's objects (non-resource paths, subresources such as `log` or `exec`, proxying).
fn filtered_verb(info: &RequestInfo) -> Option<Verb> {
    if !info.is_resource_request || !info.subresource.is_empty() {
        return None;
    }
    info.verb.api()
}
