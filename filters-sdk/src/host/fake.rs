//! The fake host of the native test harness, one per thread: the objects a test makes
//! known, and what the filter logged and counted. [`crate::host`] calls it in native builds.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value;

use crate::selector::LabelSelector;
use crate::types::Level;

/// Objects the fake host knows, and what the filter logged and counted.
pub(crate) struct FakeHost {
    /// `(group, version, resource)` → objects.
    pub(crate) objects: BTreeMap<(String, String, String), Vec<Known>>,
    pub(crate) logs: Vec<(Level, String)>,
    /// Lines below this level are neither enabled nor recorded.
    pub(crate) log_level: Level,
    pub(crate) counters: BTreeMap<String, u64>,
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
pub(crate) struct Known {
    pub(crate) value: Value,
    pub(crate) json: Vec<u8>,
}

thread_local! {
    /// The fake host of the harness running on this thread; each test runs on its own thread.
    pub(crate) static HOST: RefCell<Option<Rc<RefCell<FakeHost>>>> = const { RefCell::new(None) };
}

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
