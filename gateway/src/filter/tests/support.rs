//! What the filter host tests share: the built components, a loader, requests, lookups.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::Method;
use serde_json::Value;

use crate::filter::loading::dir::FilterFiles;
use crate::filter::loading::loader::Loader;
use crate::filter::loading::options::GatewayFile;
use crate::filter::loading::schema::SchemaChecks;
use crate::filter::metrics::FilterMetrics;
use crate::filter::runtime::engine::Runtime;
use crate::filter::settings::Limits;
use crate::filter::{FilterError, Generation, LabelSelector, Lookup};
use crate::request::RequestInfo;

/// The filters every test may use.
const FILTERS: [&str; 7] = [
    "nodestamp",
    "looper",
    "membomb",
    "trapper",
    "bloater",
    "tagger",
    "stdprobe",
];

/// `target/filters/`, built once per test run if any component is missing.
pub(super) fn filters_dir() -> PathBuf {
    edgegate_testkit::filters::built(&FILTERS).expect("the filters build")
}

/// The bytes of a built filter.
pub(super) fn wasm(name: &str) -> Vec<u8> {
    std::fs::read(filters_dir().join(format!("{name}.wasm"))).expect("read a built filter")
}

/// One runtime for the tests that do not need their own (an engine reserves address space
/// for its instance pool).
pub(super) fn runtime() -> Arc<Runtime> {
    static RUNTIME: OnceLock<Arc<Runtime>> = OnceLock::new();
    Arc::clone(RUNTIME.get_or_init(|| Runtime::new(None, None).expect("build the runtime")))
}

/// A fresh empty directory under the system temp dir, removed with all it holds when
/// dropped: at the end of its test, also one that fails.
pub(super) struct TempDir(tempfile::TempDir);

impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

/// A fresh [`TempDir`] named after `tag`.
pub(super) fn temp_dir(tag: &str) -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("edgegate-{tag}-"))
        .tempdir()
        .expect("a temporary directory");
    TempDir(dir)
}

/// Objects served to filters' `get` and `list`.
#[derive(Default)]
pub(super) struct TestLookup {
    pub(super) objects: Vec<(String, Value)>,
}

impl Lookup for TestLookup {
    fn get(
        &self,
        _: &str,
        _: &str,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Bytes> {
        self.objects.iter().find_map(|(r, o)| {
            let hit = r == resource
                && o["metadata"]["name"] == name
                && namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns);
            hit.then(|| Bytes::from(o.to_string()))
        })
    }

    fn list(
        &self,
        _: &str,
        _: &str,
        resource: &str,
        _: Option<&str>,
        selector: &LabelSelector,
    ) -> Vec<Bytes> {
        self.objects
            .iter()
            .filter(|(r, o)| r == resource && selector.matches_object(o))
            .map(|(_, o)| Bytes::from(o.to_string()))
            .collect()
    }
}

/// A filter to load: its name, which built component it is, and its `NAME.toml`.
pub(super) struct Spec<'a> {
    pub(super) name: &'a str,
    pub(super) wasm: &'a str,
    pub(super) toml: &'a str,
}

/// Loads filters into a generation, as a directory load would.
pub(super) fn load(
    specs: &[Spec<'_>],
    gateway: &str,
) -> Result<(Generation, FilterMetrics), FilterError> {
    let metrics = FilterMetrics::new();
    let loader = Loader {
        runtime: runtime(),
        schemas: Arc::new(SchemaChecks::new(None)),
        lookup: Arc::new(TestLookup::default()),
        metrics: metrics.clone(),
        default_limits: Limits::default(),
    };
    let files: BTreeMap<String, FilterFiles> = specs
        .iter()
        .map(|s| {
            let bytes = wasm(s.wasm);
            let files = FilterFiles {
                hash: crate::filter::runtime::code_store::sha256(&bytes),
                wasm: Arc::new(bytes),
                toml: Some(s.toml.to_owned()),
            };
            (s.name.to_owned(), files)
        })
        .collect();
    let gateway = GatewayFile::parse(gateway).expect("gateway config");
    let loaded = loader.load_all(&files, &gateway, &Default::default())?;
    Ok((
        Generation::new(
            1,
            loaded.filters,
            crate::filter::NodeFacts::new("edge-1".into(), Some("pool-a".into())),
        ),
        metrics,
    ))
}

/// One filter with its `NAME.toml`.
pub(super) fn one(wasm: &str, toml: &str) -> (Generation, FilterMetrics) {
    load(
        &[Spec {
            name: wasm,
            wasm,
            toml,
        }],
        "",
    )
    .expect("load the filter")
}

/// A request for `resource` with `verb` (`get`, `list`, `watch`, `create`).
pub(super) fn request(verb: &str, path: &str) -> RequestInfo {
    let (method, query) = match verb {
        "get" | "list" => (Method::GET, None),
        "watch" => (Method::GET, Some("watch=true")),
        "create" => (Method::POST, None),
        other => panic!("no test request for {other}"),
    };
    RequestInfo::parse(&method, path, query)
}

/// A ConfigMap, with labels.
pub(super) fn configmap(name: &str, labels: Value) -> Bytes {
    Bytes::from(
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": "9", "labels": labels},
            "data": {"k": "v"}
        })
        .to_string(),
    )
}

/// A failure counter of a filter.
pub(super) fn failures(metrics: &FilterMetrics, filter: &str, kind: &'static str) -> u64 {
    metrics
        .failures
        .get_or_create(&crate::filter::metrics::OutcomeLabels {
            filter: filter.into(),
            kind,
        })
        .get()
}
