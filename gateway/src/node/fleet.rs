//! Filters for a fleet: the gateway follows the filters the cluster declares for its node
//! (ConfigMap `kube-system/edgegate-filters`), pulls each image pinned by digest straight
//! from its registry (never through the hub interface), keeps it in the image store, hands
//! it to the filter host beside the directory's filters, and reports what runs on its Node.
//!
//! The last set that loaded is kept with the images: a pull or a load that fails leaves
//! that filter's running version serving, and a node that boots cut off runs it from the
//! store before its cache has even answered for the ConfigMap.
//!
//! # Layout
//! - `declaration`: the ConfigMap's keys, and the filters this node runs.
//! - `images`: the store and the pulls, with their back-off.
//! - `report`: the Node annotation.

mod declaration;
mod images;
mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use self::images::Images;
use self::report::{FilterReport, Report};
use crate::filter::{DeclaredFilter, DeclaredStatus, Filters};
use crate::node::informer::{Data, client_through, follow_config_map};
use crate::registry::{Digest, ImageStore, Reference, Registries, RegistrySettings};

/// The image store's folder in `--disk-cache-path`.
pub const IMAGE_STORE_DIR: &str = "_filter-images";
/// The file of the running set, in the image store.
const RUNNING_FILE: &str = "running.json";
/// The wait before a report that failed is written again.
const REPORT_RETRY: Duration = Duration::from_secs(10);

/// What the fleet follower is set up with.
#[derive(Clone, Debug)]
pub struct FleetSettings {
    /// The node's name.
    pub node: String,
    /// The image store's folder.
    pub store_dir: PathBuf,
    /// The registry client's CA and logins.
    pub registry: RegistrySettings,
}

/// A filter as it last loaded: its image and its `NAME.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Running {
    image: String,
    toml: String,
}

/// The follower's state.
struct Fleet {
    node: String,
    filters: Arc<Filters>,
    images: Images,
    running: BTreeMap<String, Running>,
    client: kube::Client,
    published: Option<Report>,
    report_due: Option<Instant>,
}

/// Follows the declaration through the proxy at `proxy` for node `settings.node` of the
/// pool `pool` says, for as long as the future runs. `cloud` says whether an apiserver is
/// reachable: when it comes back the report is written again, since one written while it
/// was away was answered by the gateway itself.
pub fn follow(
    proxy: SocketAddr,
    settings: FleetSettings,
    filters: Arc<Filters>,
    mut pool: watch::Receiver<Option<String>>,
    mut cloud: watch::Receiver<bool>,
) -> Result<impl Future<Output = ()> + Send + 'static, kube::Error> {
    let (mut seen, watching) = follow_config_map(proxy, "filter-fleet", declaration::NAME)?;
    let client = client_through(proxy, "filter-fleet")?;
    let applying = async move {
        let mut fleet = match Fleet::new(settings, filters, client) {
            Ok(fleet) => fleet,
            Err(error) => {
                tracing::error!(%error, "the filter image store cannot be used; filters declared in the cluster are not run");
                return;
            }
        };
        fleet.run_stored().await;
        let mut data: Option<Data> = None;
        loop {
            let wake = fleet.next_wake();
            tokio::select! {
                changed = seen.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    data = Some(seen.borrow_and_update().clone());
                }
                _ = pool.changed() => {}
                Ok(()) = cloud.changed() => {
                    if *cloud.borrow_and_update() {
                        fleet.report_due = Some(Instant::now());
                    }
                }
                () = sleep_until(wake) => {}
            }
            if let Some(data) = &data {
                let pool = pool.borrow_and_update().clone();
                fleet.reconcile(data.as_ref(), pool.as_deref()).await;
            }
        }
    };
    Ok(async move {
        tokio::join!(watching, applying);
    })
}

/// Sleeps until `at`, or for ever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Fleet {
    fn new(
        settings: FleetSettings,
        filters: Arc<Filters>,
        client: kube::Client,
    ) -> Result<Fleet, crate::registry::RegistryError> {
        let store = ImageStore::open(&settings.store_dir)?;
        let registries = Registries::new(&settings.registry).map_err(|e| {
            let message = crate::error::error_chain(&e);
            tracing::error!(error = %message, "the filter registry settings cannot be used; only stored images run");
            message
        });
        let running = store
            .read_file(RUNNING_FILE)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Ok(Fleet {
            node: settings.node,
            filters,
            images: Images::new(store, registries),
            running,
            client,
            published: None,
            report_due: None,
        })
    }

    /// Runs the set that last loaded, from the store (at start, before the declaration is read).
    async fn run_stored(&mut self) {
        if self.running.is_empty() {
            return;
        }
        let mut hand = BTreeMap::new();
        for (name, running) in &self.running {
            if let Some(filter) = self.stored(running).await {
                hand.insert(name.clone(), filter);
            }
        }
        let names: Vec<&String> = hand.keys().collect();
        tracing::info!(filters = ?names, "running the filters last declared, from the image store");
        self.filters.set_declared(hand).await;
    }

    /// The running version `running` as the host takes it, if the store has it.
    async fn stored(&self, running: &Running) -> Option<DeclaredFilter> {
        let image = Reference::parse(&running.image).ok()?;
        let component = self.images.stored(&image).await?;
        Some(DeclaredFilter {
            component: component.to_vec(),
            toml: running.toml.clone(),
        })
    }

    /// When to look again: a pull's retry, or the report's.
    fn next_wake(&self) -> Option<Instant> {
        [self.images.next_retry(), self.report_due]
            .into_iter()
            .flatten()
            .min()
    }

    /// Brings the host to what the declaration `data` says for this node in pool `pool`.
    async fn reconcile(&mut self, data: Option<&BTreeMap<String, String>>, pool: Option<&str>) {
        let empty = BTreeMap::new();
        let wanted = declaration::for_node(data.unwrap_or(&empty), &self.node, pool);
        let mut hand: BTreeMap<String, (Running, DeclaredFilter)> = BTreeMap::new();
        let mut report = Report::new();
        for (name, want) in &wanted {
            let want = match want {
                Ok(want) => want,
                Err(reason) => {
                    let failure = (None, reason.clone());
                    self.fall_back(name, failure, &mut hand, &mut report).await;
                    continue;
                }
            };
            let image = want.image.to_string();
            match self.images.component(&want.image).await {
                Ok(component) => {
                    let running = Running {
                        image,
                        toml: want.toml.clone(),
                    };
                    let filter = DeclaredFilter {
                        component: component.to_vec(),
                        toml: want.toml.clone(),
                    };
                    hand.insert(name.clone(), (running, filter));
                }
                Err(reason) => {
                    let failure = (Some(image), reason);
                    self.fall_back(name, failure, &mut hand, &mut report).await;
                }
            }
        }
        let states = self.load(&mut hand, &mut report).await;
        self.remember(&hand, &states);
        let keep: BTreeSet<Digest> = self
            .running
            .values()
            .filter_map(|r| Reference::parse(&r.image).ok()?.digest)
            .chain(
                wanted
                    .values()
                    .filter_map(|w| w.as_ref().ok()?.image.digest.clone()),
            )
            .collect();
        self.images.keep_only(keep).await;
        self.publish(report).await;
    }

    /// Reports `name`'s declared image failed (the image, if readable, and why), and hands
    /// its running version, if stored, in its place.
    async fn fall_back(
        &self,
        name: &str,
        (image, reason): (Option<String>, String),
        hand: &mut BTreeMap<String, (Running, DeclaredFilter)>,
        report: &mut Report,
    ) {
        let running = self.running.get(name);
        let line = FilterReport::new(
            image,
            "failed",
            Some(reason),
            running.map(|r| r.image.clone()),
        );
        report.insert(name.to_owned(), line);
        if let Some(running) = running
            && let Some(filter) = self.stored(running).await
        {
            hand.insert(name.to_owned(), (running.clone(), filter));
        }
    }

    /// Hands `hand` to the host; a declared version that fails to load is replaced by its
    /// running one and handed again. Reports what became of each.
    async fn load(
        &self,
        hand: &mut BTreeMap<String, (Running, DeclaredFilter)>,
        report: &mut Report,
    ) -> BTreeMap<String, DeclaredStatus> {
        let filters = |hand: &BTreeMap<String, (Running, DeclaredFilter)>| {
            hand.iter()
                .map(|(n, (_, f))| (n.clone(), f.clone()))
                .collect()
        };
        let mut states = self.filters.set_declared(filters(hand)).await;
        let mut again = false;
        for (name, state) in &states {
            let Some((handed, _)) = hand.get(name) else {
                continue;
            };
            let handed = handed.clone();
            if state.status == DeclaredStatus::Failed {
                let failure = (
                    Some(handed.image.clone()),
                    state.error.clone().unwrap_or_default(),
                );
                // A version that broke the load itself leaves the chain so that the rest
                // loads, and its running one, if another, takes its place. One that failed
                // with the chain (another filter broke the load) stays handed.
                if state.its_own {
                    hand.remove(name);
                    if self.running.get(name) == Some(&handed) {
                        report.insert(
                            name.clone(),
                            FilterReport::new(failure.0, "failed", Some(failure.1), None),
                        );
                    } else {
                        self.fall_back(name, failure, hand, report).await;
                    }
                    again = true;
                } else {
                    let line = FilterReport::new(failure.0, "failed", Some(failure.1), None);
                    report.insert(name.clone(), line);
                }
            } else if !report.contains_key(name) {
                let status = status_name(state.status);
                report.insert(
                    name.clone(),
                    FilterReport::new(Some(handed.image), status, None, None),
                );
            }
        }
        if again {
            states = self.filters.set_declared(filters(hand)).await;
        }
        states
            .into_iter()
            .map(|(name, state)| (name, state.status))
            .collect()
    }

    /// Keeps as running each handed filter that loaded, and forgets those no longer declared.
    fn remember(
        &mut self,
        hand: &BTreeMap<String, (Running, DeclaredFilter)>,
        states: &BTreeMap<String, DeclaredStatus>,
    ) {
        let mut running: BTreeMap<String, Running> = BTreeMap::new();
        for (name, (handed, _)) in hand {
            let loaded = matches!(
                states.get(name),
                Some(DeclaredStatus::Loaded | DeclaredStatus::Disabled | DeclaredStatus::TurnedOff)
            );
            match (loaded, self.running.get(name)) {
                (true, _) => running.insert(name.clone(), handed.clone()),
                (false, Some(before)) => running.insert(name.clone(), before.clone()),
                (false, None) => None,
            };
        }
        if running != self.running {
            self.running = running;
            let bytes = serde_json::to_vec(&self.running).unwrap_or_default();
            if let Err(error) = self.images.store().write_file(RUNNING_FILE, &bytes) {
                tracing::warn!(error = %crate::error::error_chain(&error), "the running filter set could not be kept");
            }
        }
    }

    /// Writes `report` on the Node if it changed, or is due again.
    async fn publish(&mut self, report: Report) {
        if self.published.as_ref() == Some(&report) && self.report_due.is_none() {
            return;
        }
        match report::publish(&self.client, &self.node, &report).await {
            Ok(()) => {
                self.published = Some(report);
                self.report_due = None;
            }
            Err(error) => {
                tracing::warn!(%error, "the node's filter report could not be written; it is tried again");
                self.report_due = Some(Instant::now() + REPORT_RETRY);
            }
        }
    }
}

/// The report's word for a status.
fn status_name(status: DeclaredStatus) -> &'static str {
    match status {
        DeclaredStatus::Loaded => "loaded",
        DeclaredStatus::Disabled => "disabled",
        DeclaredStatus::TurnedOff => "turned-off",
        DeclaredStatus::Failed => "failed",
        DeclaredStatus::Overridden => "overridden",
    }
}
