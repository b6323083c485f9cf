//! [`Filters`]: the live chain and its hot reload. The directory (and the gateway filter
//! config file) are watched; after a quiet spell they are rescanned and diffed by content
//! hash, and a changed state is loaded off the hot path and swapped in atomically with a new
//! generation number. On any failure the previous generation keeps serving.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use notify::RecommendedWatcher;
use tokio::sync::{Notify, watch};
use wasmtime::component::Component;

use super::describe::{self, LoadFailure};
use crate::filter::chain::generation::{Generation, NodeFacts};
use crate::filter::error::FilterError;
use crate::filter::loading::dir::{self, FilterFiles};
use crate::filter::loading::dir_watch;
use crate::filter::loading::loader::Loader;
use crate::filter::loading::options::{self, GatewayFile};
use crate::filter::loading::schema::SchemaChecks;
use crate::filter::lookup::Lookup;
use crate::filter::metrics::FilterMetrics;
use crate::filter::runtime::engine::Runtime;
use crate::filter::runtime::helper_process::HelperProcess;
use crate::filter::settings::FilterSettings;
use crate::metrics::Metrics;

/// What the directory held at the last load attempt: names → (hash, toml), the gateway
/// config text, and the components `yurt-hub-cfg` adds to those filters.
type Snapshot = (
    BTreeMap<String, (String, Option<String>)>,
    Option<String>,
    HubComponents,
);

/// Components added to filters, by the filter's name as `yurt-hub-cfg` gives it.
pub type HubComponents = BTreeMap<String, Vec<String>>;

/// Reload bookkeeping; its lock also serialises reloads.
#[derive(Default)]
pub(crate) struct ReloadState {
    loaded: Option<Snapshot>,
    failed: Option<Snapshot>,
    compiled: HashMap<String, Component>,
    pub(crate) disabled: BTreeMap<String, String>,
    pub(crate) last_failure: Option<LoadFailure>,
    /// The names the directory held at the last load attempt (they win over the cluster's).
    pub(crate) in_directory: std::collections::BTreeSet<String>,
}

impl ReloadState {
    /// Whether the last load that succeeded had filter `name` with component hash `hash`
    /// and `NAME.toml` text `toml`.
    pub(crate) fn loaded_with(&self, name: &str, hash: &str, toml: &str) -> bool {
        self.loaded.as_ref().is_some_and(|(files, _, _)| {
            files
                .get(name)
                .is_some_and(|(h, t)| h == hash && t.as_deref() == Some(toml))
        })
    }
}

/// What the reload task and the handle share.
pub(crate) struct Shared {
    pub(crate) settings: FilterSettings,
    /// The node facts every generation shares.
    pub(crate) node: Arc<NodeFacts>,
    pub(crate) loader: Loader,
    pub(crate) current: ArcSwap<Generation>,
    numbers: watch::Sender<u64>,
    pub(crate) state: Mutex<ReloadState>,
    /// What `yurt-hub-cfg` adds to filters' components now.
    hub_components: Mutex<HubComponents>,
    /// The filters the cluster declares for this node, pulled (`set_declared`).
    pub(crate) declared: Mutex<BTreeMap<String, FilterFiles>>,
}

/// The filter host: the live generation, its reload task and directory watch.
pub struct Filters {
    pub(crate) shared: Arc<Shared>,
    /// Dropping it stops the watch.
    _watcher: Option<RecommendedWatcher>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Filters {
    /// Starts the host: registers its metrics, loads the directory (an initial failure is
    /// logged and counted, and the empty chain serves until a good load), and watches it.
    pub async fn start(
        settings: FilterSettings,
        lookup: Arc<dyn Lookup>,
        metrics: &mut Metrics,
    ) -> Result<Filters, FilterError> {
        let filter_metrics = FilterMetrics::new();
        filter_metrics.register(metrics.registry_mut());
        Filters::start_with(settings, lookup, filter_metrics).await
    }

    /// [`Filters::start`] with metrics the caller registers (or not).
    pub async fn start_with(
        settings: FilterSettings,
        lookup: Arc<dyn Lookup>,
        metrics: FilterMetrics,
    ) -> Result<Filters, FilterError> {
        let cache_dir = settings.compiled_cache_dir.clone();
        let child = settings
            .helper
            .clone()
            .map(|exe| HelperProcess::new(exe, cache_dir.clone()));
        let schemas = Arc::new(SchemaChecks::new(child.clone()));
        let rejects = metrics.stored_rejects.clone();
        let runtime = tokio::task::spawn_blocking(move || {
            match Runtime::new_counted(Some(&cache_dir), child, rejects) {
                // The node's link to its apiserver matters more than a warm start: filters
                // are compiled in memory at every start instead.
                Err(refused @ FilterError::UntrustedStore { .. }) => {
                    tracing::error!(error = %refused, "compiled filter code is not stored or mapped; filters are compiled at every start");
                    Runtime::new(None, None)
                }
                runtime => runtime,
            }
        })
        .await
        .map_err(|e| FilterError::Engine(e.to_string()))??;
        let loader = Loader {
            runtime,
            schemas,
            lookup,
            metrics,
            default_limits: settings.limits,
        };
        let node = NodeFacts::new(settings.node_name.clone(), settings.node_pool.clone());
        let empty = Generation::new(0, Vec::new(), node.clone());
        let shared = Arc::new(Shared {
            settings,
            node,
            loader,
            current: ArcSwap::from_pointee(empty),
            numbers: watch::channel(0).0,
            state: Mutex::new(ReloadState::default()),
            hub_components: Mutex::default(),
            declared: Mutex::default(),
        });
        let Some(dir) = shared.settings.dir.clone() else {
            return Ok(Filters {
                shared,
                _watcher: None,
                task: None,
            });
        };
        let wake = Arc::new(Notify::new());
        let watcher = dir_watch::watch(
            &dir,
            shared.settings.config_file.as_deref(),
            Arc::clone(&wake),
        )?;
        let initial = Arc::clone(&shared);
        let _ = tokio::task::spawn_blocking(move || initial.reload()).await;
        let task = tokio::spawn({
            let shared = Arc::clone(&shared);
            async move {
                loop {
                    dir_watch::settled(&wake, shared.settings.debounce).await;
                    let shared = Arc::clone(&shared);
                    if let Err(error) = tokio::task::spawn_blocking(move || shared.reload()).await {
                        tracing::error!(%error, "filter reload panicked");
                    }
                }
            }
        });
        Ok(Filters {
            shared,
            _watcher: Some(watcher),
            task: Some(task),
        })
    }

    /// The generation serving now; a response keeps it for its whole life.
    pub fn current(&self) -> Arc<Generation> {
        self.shared.current.load_full()
    }

    /// Sets the node's pool filters see (the node's label changed); open watches are told,
    /// as for a new generation, so those whose filtering changes re-list.
    pub fn set_node_pool(&self, pool: Option<String>) {
        if self.shared.node.set_pool(pool) {
            self.shared.numbers.send_modify(|_| {});
        }
    }

    /// The node's pool filters see now.
    pub fn node_pool(&self) -> Option<String> {
        self.shared.node.pool()
    }

    /// Generation numbers, announced as each new generation is swapped in.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.numbers.subscribe()
    }

    /// Has each filter named in `components` (as YurtHub names them: `-`, `_` and case
    /// ignored) apply to those components too, besides its own (YurtHub's per-filter keys of
    /// `yurt-hub-cfg`), and loads a new generation when that changes what filters apply to.
    pub async fn set_hub_components(&self, components: HubComponents) {
        *self
            .shared
            .hub_components
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = components;
        self.reload_now().await;
    }

    /// Rescans and reloads now, off the async threads, and returns when that is done.
    pub(crate) async fn reload_now(&self) {
        let shared = Arc::clone(&self.shared);
        if let Err(error) = tokio::task::spawn_blocking(move || shared.reload()).await {
            tracing::error!(%error, "filter reload panicked");
        }
    }

    /// The live chain as JSON, for `GET /v1/filters`.
    pub fn describe(&self) -> serde_json::Value {
        let shared = &self.shared;
        let generation = shared.current.load_full();
        let state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        describe::describe(
            &generation,
            &state.disabled,
            state.last_failure.as_ref(),
            &shared.settings,
            &state.in_directory,
        )
    }
}

impl Drop for Filters {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Shared {
    /// Rescans and, if anything changed, loads and swaps in a new generation. Blocking.
    pub(crate) fn reload(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let outcome = self.try_reload(&mut state);
        if !matches!(outcome, Ok(None))
            && let Some(after_load) = self.settings.after_load
        {
            after_load();
        }
        match outcome {
            Ok(Some(number)) => {
                tracing::info!(generation = number, filters = ?self.current.load().names(), "filter generation loaded")
            }
            Ok(None) => {}
            Err((snapshot, error)) => {
                let message = crate::error::error_chain(&error);
                tracing::error!(error = %message, "filter load failed; the previous generation keeps serving");
                self.loader.metrics.load_failures.inc();
                state.failed = snapshot;
                state.last_failure = Some(LoadFailure {
                    filter: error.filter().map(str::to_owned),
                    message,
                });
            }
        }
    }

    // A reload runs a few times a minute at most: the error's size costs nothing.
    #[allow(clippy::type_complexity, clippy::result_large_err)]
    fn try_reload(
        &self,
        state: &mut ReloadState,
    ) -> Result<Option<u64>, (Option<Snapshot>, FilterError)> {
        let mut files = match &self.settings.dir {
            Some(dir) => dir::scan(dir).map_err(|e| (None, e))?,
            None => BTreeMap::new(),
        };
        state.in_directory = files.keys().cloned().collect();
        // The directory wins where both name a filter: it is the node's own, on the node.
        let declared = self.declared.lock().unwrap_or_else(|p| p.into_inner());
        for (name, declared) in declared.iter() {
            files
                .entry(name.clone())
                .or_insert_with(|| declared.clone());
        }
        drop(declared);
        let gateway_text = match &self.settings.config_file {
            Some(path) => Some(std::fs::read_to_string(path).map_err(|source| {
                (
                    None,
                    FilterError::Read {
                        path: path.clone(),
                        source,
                    },
                )
            })?),
            None => None,
        };
        let present: Vec<&str> = files.keys().map(String::as_str).collect();
        // Only what applies to filters here: a key for filters this node lacks loads nothing.
        let hub = options::components_of_present(
            &self
                .hub_components
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
            &present,
        );
        let snapshot = snapshot_of(&files, gateway_text.clone(), hub.clone());
        if state.loaded.as_ref() == Some(&snapshot) {
            // Back to what is live (a bad edit reverted): nothing to load, nothing failing.
            state.failed = None;
            state.last_failure = None;
            return Ok(None);
        }
        if state.failed.as_ref() == Some(&snapshot) {
            return Ok(None);
        }
        let fail = |error| (Some(snapshot.clone()), error);
        let mut gateway = match (&gateway_text, &self.settings.config_file) {
            (Some(text), Some(path)) => GatewayFile::parse(text).map_err(|e| {
                fail(FilterError::GatewayConfig {
                    path: path.clone(),
                    message: e.to_string(),
                })
            })?,
            _ => GatewayFile::default(),
        };
        gateway.disable_also(&self.settings.disabled, &present);
        gateway.add_components(&hub);
        let loaded = self
            .loader
            .load_all(&files, &gateway, &state.compiled)
            .map_err(fail)?;
        let number = self.current.load().number() + 1;
        let generation = Generation::new(number, loaded.filters, self.node.clone());
        self.current.store(Arc::new(generation));
        self.loader
            .metrics
            .generation
            .set(i64::try_from(number).unwrap_or(i64::MAX));
        self.numbers.send_replace(number);
        state.loaded = Some(snapshot);
        state.failed = None;
        state.compiled = loaded.compiled;
        state.disabled = loaded.disabled;
        self.loader
            .runtime
            .prune(state.compiled.keys().map(String::as_str));
        state.last_failure = None;
        Ok(Some(number))
    }
}

fn snapshot_of(
    files: &BTreeMap<String, FilterFiles>,
    gateway: Option<String>,
    hub: HubComponents,
) -> Snapshot {
    let files = files
        .iter()
        .map(|(name, f)| (name.clone(), (f.hash.clone(), f.toml.clone())))
        .collect();
    (files, gateway, hub)
}
