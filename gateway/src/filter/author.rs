//! Tools for filter authors: `edgegate filter check` loads a component as the gateway
//! would and prints its manifest and settings; `edgegate filter test` runs it on one object
//! or a list read from stdin and prints the decisions and the result; `edgegate filter
//! bench` measures what it costs per object ([`bench`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use edgegate_filter_sdk::Verb;
use serde_json::{Value, json};

use super::chain::Generation;
use super::loaded::LoadedFilter;
use super::loader::load_one;
use super::session::Session;
use super::{FilterError, NoLookup};
use crate::request::{RequestInfo, Verb as RequestVerb};
use crate::stream::{Transform, TransformError, Verdict};

mod bench;

pub use bench::bench;

/// The request `edgegate filter test` simulates.
#[derive(Clone, Debug)]
pub struct TestRequest {
    /// The component.
    pub wasm: PathBuf,
    /// Its `NAME.toml`, if any.
    pub options: Option<PathBuf>,
    /// The sending component.
    pub component: String,
    /// The verb, as Kubernetes spells it.
    pub verb: String,
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource, plural.
    pub resource: String,
    /// Namespace of the request.
    pub namespace: Option<String>,
    /// The node name filters are given.
    pub node_name: String,
    /// The node pool filters are given.
    pub node_pool: Option<String>,
}

/// Loads a component as the gateway would and describes it.
pub fn check(wasm: &Path, options: Option<&Path>) -> Result<String, FilterError> {
    let filter = load(wasm, options)?;
    let schema = filter
        .manifest
        .config_schema
        .as_deref()
        .and_then(|s| serde_json::from_str::<Value>(s).ok());
    let described = json!({
        "name": &*filter.name,
        "hash": filter.hash,
        "manifest": {
            "name": filter.manifest.name,
            "version": filter.manifest.version,
            "matches": filter.manifest.matches,
            "components": filter.manifest.components,
            "priority": filter.manifest.priority,
            "configSchema": schema,
        },
        "effective": {
            "priority": filter.effective.priority,
            "components": filter.effective.components,
            "onError": filter.effective.on_error,
            "config": filter.effective.config,
        },
    });
    Ok(pretty(&described))
}

/// Runs a component on one object or a `…List` (JSON in `input`) and describes the result.
pub fn test(request: &TestRequest, input: &[u8]) -> Result<String, FilterError> {
    let verb = parse_verb(&request.verb)?;
    let input: Value = serde_json::from_slice(input)
        .map_err(|e| FilterError::Input(format!("stdin is not JSON: {e}")))?;
    let mut session = open(request, verb)?;
    let list_items = match (&input["kind"], &input["items"]) {
        (Value::String(kind), Value::Array(items)) if kind.ends_with("List") => Some(items.clone()),
        _ => None,
    };
    let Some(items) = list_items else {
        let bytes = Bytes::from(input.to_string());
        let verdict = session.apply(&bytes).map_err(failed)?;
        let output = result_of(&verdict, &input);
        return Ok(pretty(
            &json!({"decision": kind_of(&verdict), "output": output}),
        ));
    };
    let objects: Vec<Bytes> = items.iter().map(|i| Bytes::from(i.to_string())).collect();
    let verdicts = session.apply_batch(&objects).map_err(failed)?;
    let kept: Vec<Value> = verdicts
        .iter()
        .zip(&items)
        .filter_map(|(verdict, item)| result_of(verdict, item))
        .collect();
    let mut output = input.clone();
    output["items"] = Value::Array(kept);
    let decisions: Vec<&str> = verdicts.iter().map(kind_of).collect();
    Ok(pretty(&json!({"decisions": decisions, "output": output})))
}

fn parse_verb(verb: &str) -> Result<Verb, FilterError> {
    Verb::parse(verb).ok_or_else(|| {
        let known: Vec<&str> = Verb::ALL.iter().map(|v| v.as_str()).collect();
        FilterError::Input(format!(
            "unknown verb {verb:?}; one of {}",
            known.join(", ")
        ))
    })
}

/// The component loaded alone, and the session the gateway would open of it for `request`.
fn open(request: &TestRequest, verb: Verb) -> Result<Session, FilterError> {
    let source = read_source(&request.wasm, request.options.as_deref())?;
    let generation = Generation::single(
        &source.name,
        &source.wasm,
        source.toml.as_deref(),
        super::NodeFacts::new(request.node_name.clone(), request.node_pool.clone()),
        Arc::new(NoLookup),
        None,
    )?;
    let info = request_info(request, verb);
    generation.session(&info, &request.component).ok_or_else(|| {
        FilterError::Input(format!(
            "filter {} does not apply to {} {} of {}/{} from {:?}: check its matches and components with `edgegate filter check`",
            source.name, request.verb, request.resource, request.group, request.version, request.component
        ))
    })
}

/// A filter's failure under `on-error = "fail"`, as the author is told it.
fn failed(error: TransformError) -> FilterError {
    FilterError::Input(format!(
        "the response would fail (on-error = \"fail\"): {}",
        error.message
    ))
}

/// A filter's name (its file stem), its bytes and its `NAME.toml` text, read from disk.
struct FilterSource {
    name: String,
    wasm: Vec<u8>,
    toml: Option<String>,
}

fn read_source(wasm: &Path, options: Option<&Path>) -> Result<FilterSource, FilterError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| FilterError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let bytes = read(wasm)?;
    let name = wasm
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| FilterError::Input(format!("{} has no file name", wasm.display())))?
        .to_owned();
    let toml = match options {
        Some(path) => Some(
            String::from_utf8(read(path)?)
                .map_err(|_| FilterError::Input(format!("{} is not UTF-8", path.display())))?,
        ),
        None => None,
    };
    Ok(FilterSource {
        name,
        wasm: bytes,
        toml,
    })
}

/// Loads one filter file with its options, without a compiled-code store.
fn load(wasm: &Path, options: Option<&Path>) -> Result<LoadedFilter, FilterError> {
    let source = read_source(wasm, options)?;
    load_one(
        &source.name,
        &source.wasm,
        source.toml.as_deref(),
        Arc::new(NoLookup),
        None,
    )
}

fn request_info(request: &TestRequest, verb: Verb) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: match verb {
            Verb::Get => RequestVerb::Get,
            Verb::List => RequestVerb::List,
            Verb::Watch => RequestVerb::Watch,
            Verb::Create => RequestVerb::Create,
            Verb::Update => RequestVerb::Update,
            Verb::Patch => RequestVerb::Patch,
            Verb::Delete => RequestVerb::Delete,
            Verb::DeleteCollection => RequestVerb::DeleteCollection,
        },
        api_prefix: if request.group.is_empty() {
            "api"
        } else {
            "apis"
        },
        api_group: request.group.clone(),
        api_version: request.version.clone(),
        namespace: request.namespace.clone().unwrap_or_default(),
        resource: request.resource.clone(),
        subresource: String::new(),
        name: String::new(),
    }
}

fn kind_of(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Keep => "keep",
        Verdict::Drop => "drop",
        Verdict::Replace(_) => "replace",
    }
}

/// What the client would receive for one object; a replacement that is not JSON is shown
/// as a string.
fn result_of(verdict: &Verdict, original: &Value) -> Option<Value> {
    match verdict {
        Verdict::Keep => Some(original.clone()),
        Verdict::Drop => None,
        Verdict::Replace(bytes) => Some(
            serde_json::from_slice(bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned())),
        ),
    }
}

fn pretty(value: &Value) -> String {
    // Serialising a Value cannot fail.
    serde_json::to_string_pretty(value).unwrap_or_default()
}
