//! Tools for filter authors: `edgegate filter check` loads a component as the gateway
//! would and prints its manifest and settings; `edgegate filter test` runs it on one object
//! or a list read from stdin and prints the decisions and the result; `edgegate filter
//! bench` measures what it costs per object ([`bench`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use edgegate_filter_sdk::Verb;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::chain::Generation;
use super::error::FilterError;
use super::loaded::LoadedFilter;
use super::loader::load_one;
use super::lookup::NoLookup;
use super::session::Session;
use crate::request::RequestInfo;
use crate::stream::{Transform, TransformError, Verdict};
use input::Input;

mod bench;
mod input;

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
/// The filter is given each object as written, and the output keeps the order of the fields
/// of what it was given and of what it returned.
pub fn test(request: &TestRequest, input: &[u8]) -> Result<String, FilterError> {
    let verb = parse_verb(&request.verb)?;
    let input = Input::read(input)?;
    let mut session = open(request, verb)?;
    let described = match &input {
        Input::Object(object) => {
            let verdict = session
                .apply(&Bytes::copy_from_slice(object.get().as_bytes()))
                .map_err(failed)?;
            let shown = Shown::of(&verdict, object);
            serde_json::to_vec(&Described::Object {
                decision: kind_of(&verdict),
                output: shown,
            })
        }
        Input::List { fields, items } => {
            let objects: Vec<Bytes> = items
                .iter()
                .map(|item| Bytes::copy_from_slice(item.get().as_bytes()))
                .collect();
            let verdicts = session.apply_batch(&objects).map_err(failed)?;
            let kept = verdicts
                .iter()
                .zip(items)
                .filter_map(|(verdict, item)| Shown::of(verdict, item))
                .collect();
            serde_json::to_vec(&Described::List {
                decisions: verdicts.iter().map(kind_of).collect(),
                output: ListOutput { fields, kept },
            })
        }
    };
    // Serialising strings and JSON already checked cannot fail.
    let described = described.unwrap_or_default();
    Ok(crate::json::indent(&described).unwrap_or_default())
}

/// What `edgegate filter test` prints.
#[derive(Serialize)]
#[serde(untagged)]
enum Described<'a> {
    Object {
        decision: &'static str,
        output: Option<Shown<'a>>,
    },
    List {
        decisions: Vec<&'static str>,
        output: ListOutput<'a>,
    },
}

/// What the client would receive for one object: its bytes, or a replacement's; a
/// replacement that is not JSON is shown as a string.
#[derive(Serialize)]
#[serde(untagged)]
enum Shown<'a> {
    Json(&'a RawValue),
    Text(String),
}

impl<'a> Shown<'a> {
    /// The object shown for `verdict` on `original`; none when it is dropped.
    fn of(verdict: &'a Verdict, original: &'a RawValue) -> Option<Shown<'a>> {
        match verdict {
            Verdict::Keep => Some(Shown::Json(original)),
            Verdict::Drop => None,
            Verdict::Replace(bytes) => Some(match serde_json::from_slice(bytes) {
                Ok(json) => Shown::Json(json),
                Err(_) => Shown::Text(String::from_utf8_lossy(bytes).into_owned()),
            }),
        }
    }
}

/// The list the client would receive: its fields in order, `items` the objects kept.
struct ListOutput<'a> {
    fields: &'a [(String, &'a RawValue)],
    kept: Vec<Shown<'a>>,
}

impl Serialize for ListOutput<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for (key, value) in self.fields {
            if key == "items" {
                map.serialize_entry(key, &self.kept)?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
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
        super::chain::NodeFacts::new(request.node_name.clone(), request.node_pool.clone()),
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
        verb: verb.into(),
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

fn pretty(value: &Value) -> String {
    // Serialising a Value cannot fail.
    serde_json::to_string_pretty(value).unwrap_or_default()
}
