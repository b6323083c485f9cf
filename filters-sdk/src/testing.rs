//! The native test harness: runs a [`Filter`] exactly as the component exports would (same
//! parsing, same encoding of decisions), against a fake host whose objects the test registers
//! and whose logs and counters it reads back. Filter logic is tested with plain `cargo test`.
//!
//! Code that makes lookups outside a filter is tested against a [`Host`] alone.
//!
//! ```text
//! let harness = Harness::<MyFilter>::configure(json!({"key": "value"}))?;
//! harness.add_object("", "v1", "services", json!({...}));
//! let ctx = Context::new("kube-proxy", Verb::List, "", "v1", "services").node_name("n1");
//! assert_eq!(harness.filter(&ctx, &json!({...})), Output::Keep);
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value;

use crate::adapter::Slot;
use crate::filter::Filter;
use crate::selector::LabelSelector;
use crate::types::{Context, Level, Manifest, Output};

/// Objects the fake host knows, and what the filter logged and counted.
struct FakeHost {
    /// `(group, version, resource)` → objects.
    objects: BTreeMap<(String, String, String), Vec<Known>>,
    logs: Vec<(Level, String)>,
    /// Lines below this level are neither enabled nor recorded.
    log_level: Level,
    counters: BTreeMap<String, u64>,
}

impl Default for FakeHost {
    fn default() -> Self {
        FakeHost {
            objects: BTreeMap::new(),
            logs: Vec::new(),
            log_level: Level::Trace,
            counters: BTreeMap::new(),
        }
    }
}

/// An object the fake host knows, encoded once when it is added, as the gateway's informers
/// encode each object version once.
struct Known {
    value: Value,
    json: Vec<u8>,
}

thread_local! {
    /// The fake host of the harness running on this thread; each test runs on its own thread.
    static HOST: RefCell<Option<Rc<RefCell<FakeHost>>>> = const { RefCell::new(None) };
}

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
    pub fn add_object(&self, group: &str, version: &str, resource: &str, object: Value) {
        self.host
            .borrow_mut()
            .objects
            .entry((group.to_owned(), version.to_owned(), resource.to_owned()))
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
    pub fn add_object(&self, group: &str, version: &str, resource: &str, object: Value) {
        self.host.add_object(group, version, resource, object);
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

/// The host functions of [`crate::host`] in native builds: served by this thread's harness.
pub(crate) mod fake {
    use super::*;

    fn with_host<T>(default: T, run: impl FnOnce(&mut FakeHost) -> T) -> T {
        HOST.with(|current| match current.borrow().as_ref() {
            Some(host) => run(&mut host.borrow_mut()),
            None => default,
        })
    }

    fn in_scope(object: &Value, namespace: Option<&str>) -> bool {
        namespace.is_none_or(|ns| {
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                == Some(ns)
        })
    }

    pub(crate) fn get(
        group: &str,
        version: &str,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Vec<u8>> {
        with_host(None, |host| {
            let key = (group.to_owned(), version.to_owned(), resource.to_owned());
            host.objects.get(&key)?.iter().find_map(|known| {
                let object = &known.value;
                let named = object.pointer("/metadata/name").and_then(Value::as_str) == Some(name);
                let scoped = match namespace {
                    Some(_) => in_scope(object, namespace),
                    None => object.pointer("/metadata/namespace").is_none(),
                };
                (named && scoped).then(|| known.json.clone())
            })
        })
    }

    pub(crate) fn list(
        group: &str,
        version: &str,
        resource: &str,
        namespace: Option<&str>,
        selector: &str,
    ) -> Vec<Vec<u8>> {
        // A bad selector traps in the gateway; here it fails the test the same way.
        let selector = match LabelSelector::parse(selector) {
            Ok(selector) => selector,
            Err(error) => panic!("bad label selector {selector:?}: {error}"),
        };
        with_host(Vec::new(), |host| {
            let key = (group.to_owned(), version.to_owned(), resource.to_owned());
            host.objects
                .get(&key)
                .into_iter()
                .flatten()
                .filter(|known| {
                    in_scope(&known.value, namespace) && selector.matches_object(&known.value)
                })
                .map(|known| known.json.clone())
                .collect()
        })
    }

    pub(crate) fn log(level: Level, message: &str) {
        with_host((), |host| {
            if level >= host.log_level {
                host.logs.push((level, message.to_owned()));
            }
        });
    }

    pub(crate) fn log_enabled(level: Level) -> bool {
        with_host(false, |host| level >= host.log_level)
    }

    pub(crate) fn count(name: &str, delta: u64) {
        with_host((), |host| {
            *host.counters.entry(name.to_owned()).or_default() += delta;
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::host;
    use crate::object::Object;
    use crate::types::{Decision, Verb};

    /// Keeps objects whose `app` label names a Service that exists in the same namespace
    /// and has pods labelled for it; logs and counts what it drops.
    struct Lookups;

    impl Filter for Lookups {
        fn manifest() -> Manifest {
            Manifest::new("lookups", "0.0.1").matches("", &["pods"], &[Verb::List])
        }
        fn configure(config: Value) -> Result<Self, String> {
            match config.get("fail") {
                Some(_) => Err("asked to fail".into()),
                None => Ok(Lookups),
            }
        }
        fn filter(&self, _ctx: &Context, object: &mut Object) -> Decision {
            let app = object.label("app").unwrap_or_default().to_owned();
            let ns = object.namespace().map(str::to_owned);
            let service = host::get("", "v1", "services", ns.as_deref(), &app);
            let peers = host::list("", "v1", "pods", ns.as_deref(), &format!("app={app}"));
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
            "",
            "v1",
            "services",
            json!({"metadata": {"name": "web", "namespace": "default"}}),
        );
        harness.add_object("", "v1", "pods", pod("web-1", "web"));
        harness.add_object("", "v1", "pods", pod("db-1", "db"));
        let ctx = Context::new("kubelet", Verb::List, "", "v1", "pods");

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
        fake.add_object("", "v1", "nodes", json!({"metadata": {"name": "n1"}}));
        assert_eq!(
            host::get("", "v1", "nodes", None, "n1").and_then(|n| n.name().map(str::to_owned)),
            Some("n1".to_owned())
        );
        assert!(host::get("", "v1", "nodes", Some("default"), "n1").is_none());
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
    struct KeepAfterEdit;

    impl Filter for KeepAfterEdit {
        fn manifest() -> Manifest {
            Manifest::new("keep-after-edit", "0.0.1").matches("", &["pods"], &[Verb::List])
        }
        fn configure(_config: Value) -> Result<Self, String> {
            Ok(KeepAfterEdit)
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
        let ctx = Context::new("kubelet", Verb::List, "", "v1", "pods");
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

    #[test]
    fn configure_errors_reach_the_test() {
        let error = Harness::<Lookups>::configure(json!({"fail": true})).err();
        assert_eq!(error.as_deref(), Some("asked to fail"));
    }

    #[test]
    #[should_panic(expected = "not a Kubernetes object")]
    fn non_objects_trap_as_in_the_gateway() {
        let harness = Harness::<Lookups>::configure(json!({})).unwrap();
        let ctx = Context::new("kubelet", Verb::List, "", "v1", "pods");
        harness.filter(&ctx, &json!([1, 2]));
    }
}
