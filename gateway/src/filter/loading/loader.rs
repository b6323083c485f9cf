//! Loads filters: compile (or reuse the compiled code of an unchanged `.wasm`), link,
//! instantiate a first instance, read its manifest, merge the operator's settings, check the
//! config against the schema and configure. Any failure fails the whole load, naming the
//! filter and the step.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use edgegate_filter_sdk::{Manifest, ResourceMatch};
use wasmtime::component::Component;

use super::dir::FilterFiles;
use super::loaded_filter::LoadedFilter;
use super::options::{self, FilterFile, GatewayFile};
use super::schema::SchemaChecks;
use crate::filter::error::FilterError;
use crate::filter::lookup::Lookup;
use crate::filter::metrics::FilterMetrics;
use crate::filter::runtime::bindings;
use crate::filter::runtime::code_store::sha256;
use crate::filter::runtime::engine::Runtime;
use crate::filter::runtime::instance::Instantiator;
use crate::filter::settings::Limits;

/// What loading a directory produced.
pub(crate) struct Loaded {
    /// The enabled filters (not yet in chain order).
    pub(crate) filters: Vec<Arc<LoadedFilter>>,
    /// Filters present but disabled, with their hashes.
    pub(crate) disabled: BTreeMap<String, String>,
    /// Compiled code by content hash, for the next load to reuse.
    pub(crate) compiled: HashMap<String, Component>,
}

/// Loads filters into one runtime.
#[derive(Clone)]
pub(crate) struct Loader {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) schemas: Arc<SchemaChecks>,
    pub(crate) lookup: Arc<dyn Lookup>,
    pub(crate) metrics: FilterMetrics,
    pub(crate) default_limits: Limits,
}

impl Loader {
    /// Loads every filter of a directory scan; `compiled` holds code of earlier loads.
    pub(crate) fn load_all(
        &self,
        files: &BTreeMap<String, FilterFiles>,
        gateway: &GatewayFile,
        compiled: &HashMap<String, Component>,
    ) -> Result<Loaded, FilterError> {
        let mut loaded = Loaded {
            filters: Vec::new(),
            disabled: BTreeMap::new(),
            compiled: HashMap::new(),
        };
        for (name, files) in files {
            let file = parse_file(name, files.toml.as_deref())?;
            if file.disabled() || gateway.disables(name) {
                loaded.disabled.insert(name.clone(), files.hash.clone());
                continue;
            }
            let component = match compiled.get(&files.hash) {
                Some(component) => component.clone(),
                None => {
                    let (component, place) = self.runtime.compile(name, &files.wasm)?;
                    match place {
                        Some(place) => self.metrics.compiled(place),
                        None => {
                            self.metrics.stored_loads.inc();
                        }
                    }
                    component
                }
            };
            let filter = self.load(name, &component, &files.hash, &file, gateway)?;
            loaded.compiled.insert(files.hash.clone(), component);
            loaded.filters.push(Arc::new(filter));
        }
        Ok(loaded)
    }

    /// Loads one compiled filter with its settings.
    pub(crate) fn load(
        &self,
        name: &str,
        component: &Component,
        hash: &str,
        file: &FilterFile,
        gateway: &GatewayFile,
    ) -> Result<LoadedFilter, FilterError> {
        let options_error = |message: String| FilterError::Options {
            name: name.to_owned(),
            message,
        };
        let instantiate_error = |failure| FilterError::Instantiate {
            name: name.to_owned(),
            message: format!("{failure}"),
        };
        let limits = file.limits(self.default_limits).map_err(options_error)?;
        let pre = self.runtime.prepare(name, component)?;
        let instantiator = Instantiator::new(
            Arc::from(name),
            limits,
            pre,
            Arc::clone(&self.runtime),
            Arc::clone(&self.lookup),
            self.metrics.clone(),
        );
        let mut instance = instantiator.instantiate().map_err(instantiate_error)?;
        let manifest = manifest_of(
            instantiator
                .manifest(&mut instance)
                .map_err(instantiate_error)?,
        );
        let effective = options::effective(name, &manifest, file, gateway, self.default_limits)
            .map_err(options_error)?;
        self.schemas
            .check(
                manifest.config_schema.as_deref(),
                &effective.config,
                &self.metrics,
            )
            .map_err(|message| FilterError::Schema {
                name: name.to_owned(),
                message,
            })?;
        let config = effective.config.to_string();
        instantiator
            .configure(&mut instance, &config)
            .map_err(instantiate_error)?
            .map_err(|message| FilterError::Configure {
                name: name.to_owned(),
                message,
            })?;
        Ok(LoadedFilter::new(
            manifest,
            hash.to_owned(),
            effective,
            instantiator,
            instance,
        ))
    }
}

/// Loads one filter from its bytes and its `NAME.toml` text as the gateway would, in a runtime
/// of its own; compiled code is cached under `compiled_cache` when given.
pub(crate) fn load_one(
    name: &str,
    wasm: &[u8],
    toml: Option<&str>,
    lookup: Arc<dyn Lookup>,
    compiled_cache: Option<&Path>,
) -> Result<LoadedFilter, FilterError> {
    let file = parse_file(name, toml)?;
    let runtime = Runtime::new(compiled_cache, None)?;
    let (component, _) = runtime.compile(name, wasm)?;
    let loader = Loader {
        runtime,
        schemas: Arc::new(SchemaChecks::new(None)),
        lookup,
        metrics: FilterMetrics::new(),
        default_limits: Limits::default(),
    };
    loader.load(
        name,
        &component,
        &sha256(wasm),
        &file,
        &GatewayFile::default(),
    )
}

/// Parses a filter's `NAME.toml` (an absent file means all defaults).
pub(crate) fn parse_file(name: &str, text: Option<&str>) -> Result<FilterFile, FilterError> {
    match text {
        Some(text) => FilterFile::parse(text).map_err(|error| FilterError::Options {
            name: name.to_owned(),
            message: error.to_string(),
        }),
        None => Ok(FilterFile::default()),
    }
}

/// The manifest in the SDK's types.
fn manifest_of(manifest: bindings::Manifest) -> Manifest {
    Manifest {
        name: manifest.name,
        version: manifest.version,
        matches: manifest
            .matches
            .into_iter()
            .map(|m| ResourceMatch {
                group: m.group,
                resources: m.resources,
                verbs: m.verbs.into_iter().map(Into::into).collect(),
            })
            .collect(),
        components: manifest.components,
        priority: manifest.priority,
        config_schema: manifest.config_schema,
    }
}
