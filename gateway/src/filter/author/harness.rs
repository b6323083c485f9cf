//! What the author tools share: the request a tool simulates, loading a filter from its
//! files as the gateway would, and opening the session the gateway would open for it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use edgegate_filter_sdk::Verb;

use crate::filter::chain::generation::{Generation, NodeFacts};
use crate::filter::chain::session::Session;
use crate::filter::error::FilterError;
use crate::filter::loading::loaded_filter::LoadedFilter;
use crate::filter::loading::loader::load_one;
use crate::filter::lookup::NoLookup;
use crate::request::RequestInfo;
use crate::stream::{TransformError, Verdict};

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
    /// A compiled-code store to keep and reuse the component's compiled code in.
    pub compiled_cache: Option<PathBuf>,
}

/// The verb `verb` names, as Kubernetes spells it.
pub(super) fn parse_verb(verb: &str) -> Result<Verb, FilterError> {
    Verb::parse(verb).ok_or_else(|| {
        let known: Vec<&str> = Verb::ALL.iter().map(|v| v.as_str()).collect();
        FilterError::Input(format!(
            "unknown verb {verb:?}; one of {}",
            known.join(", ")
        ))
    })
}

/// The component loaded alone, and the session the gateway would open of it for `request`.
pub(super) fn open(request: &TestRequest, verb: Verb) -> Result<Session, FilterError> {
    let source = read_source(&request.wasm, request.options.as_deref())?;
    let generation = Generation::single(
        &source.name,
        &source.wasm,
        source.toml.as_deref(),
        NodeFacts::new(request.node_name.clone(), request.node_pool.clone()),
        Arc::new(NoLookup),
        request.compiled_cache.as_deref(),
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
pub(super) fn failed(error: TransformError) -> FilterError {
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

/// The files of a filter, read.
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

/// Loads one filter file with its options, with its compiled code kept in `compiled_cache`
/// if given.
pub(super) fn load(
    wasm: &Path,
    options: Option<&Path>,
    compiled_cache: Option<&Path>,
) -> Result<LoadedFilter, FilterError> {
    let source = read_source(wasm, options)?;
    load_one(
        &source.name,
        &source.wasm,
        source.toml.as_deref(),
        Arc::new(NoLookup),
        compiled_cache,
    )
}

/// The request info the gateway would derive for `request`.
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

/// The decision a verdict stands for, as the tools print it.
pub(super) fn kind_of(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Keep => "keep",
        Verdict::Drop => "drop",
        Verdict::Replace(_) => "replace",
    }
}
