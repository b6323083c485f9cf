//! The native test harness: runs a [`Filter`] exactly as the component exports would (same
//! parsing, same encoding of decisions), against a fake host whose objects the test registers
//! and whose logs and counters it reads back. Filter logic is tested with plain `cargo test`.
//!
//! Code that makes lookups outside a filter is tested against a [`Host`] alone.
//!
//! ```text
//! let harness = Harness::<MyFilter>::configure(json!({"key": "value"}))?;
//! harness.add_object(Resource::new("", "v1", "services"), json!({...}));
//! let ctx = Context::new("kube-proxy", Verb::List, Resource::new("", "v1", "services")).node_name("n1");
//! assert_eq!(harness.filter(&ctx, &json!({...})), Output::Keep);
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value;

pub use crate::adapter::Output;
use crate::adapter::Slot;
use crate::filter::Filter;
use crate::host::fake::{FakeHost, HOST, Known};
use crate::types::{Context, Level, Manifest, Resource};

/// The fake host alone, serving [`crate::host`] on this thread: for testing code that makes
/// lookups outside a filter (a [`Harness`] has one of its own).
pub struct Host {
    host: Rc<RefCell<FakeHost>>,
}

impl Host {
    /// Installs a fresh fake host for this thread, replacing any earlier one.
    pub fn install() -> Host {
        let host = Rc::new(RefCell::new(FakeHost::default()));
        HOST.with(|current| *current.borrow_mut() = Some(Rc::clone(&host)));
        Host { host }
    }

    /// Makes an object known to the host's `get` and `list` (by its `metadata.namespace` and
    /// `metadata.name`).
    pub fn add_object(&self, resource: Resource<'_>, object: Value) {
        self.host
            .borrow_mut()
            .objects
            .entry((
                resource.group.to_owned(),
                resource.version.to_owned(),
                resource.resource.to_owned(),
            ))
            .or_default()
            .push(Known {
                json: object.to_string().into_bytes(),
                value: object,
            });
    }

    /// Sets the lowest level the host's log shows, as the gateway's `--log-level` does:
    /// `log_enabled` answers by it, and lower lines are not recorded. Every level at first.
    pub fn log_level(&self, level: Level) {
        self.host.borrow_mut().log_level = level;
    }

    /// The lines logged so far.
    pub fn logs(&self) -> Vec<(Level, String)> {
        self.host.borrow().logs.clone()
    }

    /// The counters bumped so far.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        self.host.borrow().counters.clone()
    }
}

/// A configured filter under test, with its fake host.
pub struct Harness<F: Filter> {
    slot: Slot<F>,
    host: Host,
}

impl<F: Filter> Harness<F> {
    /// Configures the filter with `config` (as the gateway would after checking it against
    /// the manifest's schema) and installs a fresh fake host for this thread.
    pub fn configure(config: Value) -> Result<Harness<F>, String> {
        let host = Host::install();
        let slot = Slot::new();
        slot.configure(&config.to_string())?;
        Ok(Harness { slot, host })
    }

    /// The filter's manifest.
    pub fn manifest(&self) -> Manifest {
        self.slot.manifest()
    }

    /// Makes an object known to the host's `get` and `list` (by its `metadata.namespace` and
    /// `metadata.name`).
    pub fn add_object(&self, resource: Resource<'_>, object: Value) {
        self.host.add_object(resource, object);
    }

    /// Sets the lowest level the host's log shows ([`Host::log_level`]).
    pub fn log_level(&self, level: Level) {
        self.host.log_level(level);
    }

    /// Runs the filter on one object, as the host's `filter` call does.
    pub fn filter(&self, ctx: &Context, object: &Value) -> Output {
        self.slot.filter(ctx, object.to_string().into_bytes())
    }

    /// Runs the filter on several objects, as the host's `filter-batch` call does.
    pub fn filter_batch(&self, ctx: &Context, objects: &[Value]) -> Vec<Output> {
        let objects: Vec<Vec<u8>> = objects.iter().map(|o| o.to_string().into_bytes()).collect();
        self.slot.filter_batch(ctx, objects)
    }

    /// Runs the filter on one object given as the JSON bytes the host sends, without the
    /// re-encoding of [`Harness::filter`]: what benchmarks compare with the wasm host.
    pub fn filter_bytes(&self, ctx: &Context, object: &[u8]) -> Output {
        self.slot.filter(ctx, object.to_vec())
    }

    /// Runs the filter on several objects given as JSON bytes, as the host's `filter-batch`
    /// call does.
    pub fn filter_batch_bytes(&self, ctx: &Context, objects: &[Vec<u8>]) -> Vec<Output> {
        self.slot.filter_batch(ctx, objects.to_vec())
    }

    /// The lines the filter logged so far.
    pub fn logs(&self) -> Vec<(Level, String)> {
        self.host.logs()
    }

    /// The counters the filter bumped so far.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        self.host.counters()
    }
}

/// The items of a `…List` as kube-apiserver sends it (JSON text), for tests on fixtures.
/// Panics, failing the test, if the text is not such a list.
pub fn list_items(list: &str) -> Vec<Value> {
    let list: Value = match serde_json::from_str(list) {
        Ok(list) => list,
        Err(error) => panic!("the fixture is not JSON: {error}"),
    };
    match list.get("items") {
        Some(Value::Array(items)) => items.clone(),
        _ => panic!("the fixture is not a list: it has no items"),
    }
}

/// The item `namespace/name` of a `…List` (JSON text; `namespace` empty for cluster-scoped
/// objects). Panics, failing the test, if there is none.
pub fn list_item(list: &str, namespace: &str, name: &str) -> Value {
    let named = |item: &Value| {
        let at = |key: &str| {
            item.pointer(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        at("/metadata/namespace") == namespace && at("/metadata/name") == name
    };
    match list_items(list).into_iter().find(named) {
        Some(item) => item,
        None => panic!("the fixture has no item {namespace}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::filter::IntoFilter;
    use crate::kube::pool::NODES;
    use crate::kube::service::SERVICES;
    use crate::types::Resource;

    const PODS: Resource<'static> = Resource::new("", "v1", "pods");
    use crate::host;
    use crate::object::Object;
    use crate::types::{Decision, Verb};

    /// Keeps objects whose `app` label names a Service that exists in the same namespace
    /// and has pods labelled for it; logs and counts what it drops.
    struct Lookups;

    impl IntoFilter<Lookups> for Value {
        fn into_filter(self) -> Result<Lookups, String> {
            match self.get("fail") {
                Some(_) => Err("asked to fail".into()),
                None => Ok(Lookups),
            }
        }
    }

    impl Filter for Lookups {
        type Config = Value;

        fn manifest() -> Manifest {
            Manifest::new("lookups", "0.0.1").matches("", &["pods"], &[Verb::List])
        }
        fn filter(&self, _ctx: &Context, object: &mut Object) -> Decision {
            let app = object.label("app").unwrap_or_default().to_owned();
            let ns = object.namespace().map(str::to_owned);
            let service = host::get(SERVICES, ns.as_deref(), &app);
            let peers = host::list(PODS, ns.as_deref(), &format!("app={app}"));
            if service.is_some() && !peers.is_empty() {
                object.set_annotation("peers", &peers.len().to_string());
                return Decision::Keep;
            }
            host::log(Level::Info, &format!("dropping {app}"));
            host::count("dropped", 1);
            Decision::Drop
        }
    }

    fn pod(name: &str, app: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": app}}})
    }

    #[test]
    fn the_fake_host_serves_lookups_and_records_logs_and_counters() {
        let harness = Harness::<Lookups>::configure(json!({})).unwrap();
        harness.add_object(
            Resource::new("", "v1", "services"),
            json!({"metadata": {"name": "web", "namespace": "default"}}),
        );
        harness.add_object(Resource::new("", "v1", "pods"), pod("web-1", "web"));
        harness.add_object(Resource::new("", "v1", "pods"), pod("db-1", "db"));
        let ctx = Context::new("kubelet", Verb::List, Resource::new("", "v1", "pods"));

        let out = harness.filter(&ctx, &pod("web-2", "web"));
        assert_eq!(out.json().unwrap()["metadata"]["annotations"]["peers"], "1");
        assert_eq!(harness.filter(&ctx, &pod("db-2", "db")), Output::Drop);
        let batch = harness.filter_batch(&ctx, &[pod("x", "none"), pod("web-3", "web")]);
        assert_eq!(batch[0], Output::Drop);
        assert!(matches!(batch[1], Output::Replace(_)));
        assert_eq!(harness.counters().get("dropped"), Some(&2));
        assert_eq!(harness.logs()[0], (Level::Info, "dropping db".to_owned()));
        assert_eq!(harness.manifest().name, "lookups");
    }

    #[test]
    fn a_host_alone_serves_lookups_outside_a_filter() {
        let fake = Host::install();
        fake.add_object(
            Resource::new("", "v1", "nodes"),
            json!({"metadata": {"name": "n1"}}),
        );
        assert_eq!(
            host::get(NODES, None, "n1").and_then(|n| n.name().map(str::to_owned)),
            Some("n1".to_owned())
        );
        assert!(host::get(NODES, Some("default"), "n1").is_none());
        host::count("looked-up", 2);
        assert_eq!(fake.counters().get("looked-up"), Some(&2));
    }

    #[test]
    fn the_log_level_decides_what_is_enabled_and_recorded() {
        let fake = Host::install();
        assert!(host::log_enabled(Level::Trace), "every level at first");
        fake.log_level(Level::Info);
        assert!(!host::log_enabled(Level::Debug));
        assert!(host::log_enabled(Level::Info) && host::log_enabled(Level::Error));
        host::log(Level::Debug, "hidden");
        host::log(Level::Warn, "shown");
        assert_eq!(fake.logs(), [(Level::Warn, "shown".to_owned())]);
    }

    #[test]
    fn without_a_host_nothing_is_logged() {
        HOST.with(|current| *current.borrow_mut() = None);
        assert!(!host::log_enabled(Level::Error));
    }

    #[test]
    fn fixture_lists_give_their_items() {
        let list = r#"{"kind": "PodList", "items": [
            {"metadata": {"name": "a", "namespace": "x"}}, {"metadata": {"name": "n"}}]}"#;
        assert_eq!(list_items(list).len(), 2);
        assert_eq!(list_item(list, "x", "a")["metadata"]["name"], "a");
        assert_eq!(list_item(list, "", "n")["metadata"]["name"], "n");
        let missing = std::panic::catch_unwind(|| list_item(list, "y", "a"));
        assert!(missing.is_err());
        assert!(std::panic::catch_unwind(|| list_items(r#"{"kind": "Pod"}"#)).is_err());
    }

    /// Sets the annotation its config names (when the object lacks it), touches `spec`
    /// without changing it, and keeps every object.
    #[derive(serde::Deserialize)]
    struct KeepAfterEdit;

    impl Filter for KeepAfterEdit {
        type Config = Self;

        fn manifest() -> Manifest {
            Manifest::new("keep-after-edit", "0.0.1").matches("", &["pods"], &[Verb::List])
        }
        fn filter(&self, _ctx: &Context, object: &mut Object) -> Decision {
            let _untouched = object.get_mut("spec.nodeName");
            if object.label("edit").is_some() {
                object.set_annotation("edited", "yes");
            }
            Decision::Keep
        }
    }

    #[test]
    fn keep_after_an_edit_forwards_the_edit_and_keep_without_one_the_original() {
        let harness = Harness::<KeepAfterEdit>::configure(json!({})).unwrap();
        let ctx = Context::new("kubelet", Verb::List, Resource::new("", "v1", "pods"));
        let pod = |labels: Value| {
            json!({"metadata": {"name": "p", "labels": labels},
                                         "spec": {"nodeName": "n1"}})
        };
        let edited = harness.filter(&ctx, &pod(json!({"edit": "1"})));
        assert_eq!(
            edited.json().unwrap()["metadata"]["annotations"]["edited"],
            "yes"
        );
        assert_eq!(harness.filter(&ctx, &pod(json!({}))), Output::Keep);
    }

    /// A filter that is its own config, with a field.
    #[derive(serde::Deserialize)]
    struct Typed {
        #[allow(dead_code)]
        count: u32,
    }

    impl Filter for Typed {
        type Config = Self;

        fn manifest() -> Manifest {
            Manifest::new("typed", "0.0.1")
        }
        fn filter(&self, _ctx: &Context, _object: &mut Object) -> Decision {
            Decision::Keep
        }
    }

    #[test]
    fn configure_errors_reach_the_test() {
        let error = Harness::<Lookups>::configure(json!({"fail": true})).err();
        assert_eq!(error.as_deref(), Some("asked to fail"));
        // A unit struct takes no config: the schema, not the type, refuses keys.
        assert!(Harness::<KeepAfterEdit>::configure(json!({})).is_ok());
        assert!(Harness::<KeepAfterEdit>::configure(json!({"key": 1})).is_ok());
        let error = Harness::<Typed>::configure(json!({"count": "one"})).err();
        assert!(error.is_some_and(|error| error.starts_with("bad config")));
        assert!(Harness::<Typed>::configure(json!({"count": 1})).is_ok());
    }

    #[test]
    #[should_panic(expected = "not a Kubernetes object")]
    fn non_objects_trap_as_in_the_gateway() {
        let harness = Harness::<Lookups>::configure(json!({})).unwrap();
        let ctx = Context::new("kubelet", Verb::List, Resource::new("", "v1", "pods"));
        harness.filter(&ctx, &json!([1, 2]));
    }
}
