//! The objects filters look up (Services, Nodes, NodePools), kept current by informers that
//! are clients of the gateway itself: their lists and watches pass through it as component
//! `edgegate`, so they are balanced, health-checked, cached — and answered from the cache
//! while the cloud is away, and after a restart without it. After a restart each informer
//! starts from what the cache persisted of it and watches on from its resourceVersion
//! (`informer/resume.rs`).
//!
//! A change to what lookups depend on (labels and annotations of Services, labels of Nodes,
//! the members of NodePools) is announced per object, so watches whose filters looked that
//! object up can re-list and be filtered anew (YurtHub never re-filters: #871, #954). Each
//! kind is a change feed of [`Lookup::feed`]. Node status heartbeats announce nothing.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use futures_util::StreamExt;
use kube::api::{Api, ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{broadcast, watch};
use tokio::time::{Duration, Instant};

use crate::cache::Store as CacheStore;
use crate::filter::LookupChange;

mod backoff;
mod client;
mod config_map;
mod lookup;
mod objects;
mod resume;
mod slim;

pub(crate) use backoff::ListBackoff;
pub(crate) use client::{client_through, config_through};
pub(crate) use config_map::{Data, NAMESPACE as CONFIG_MAP_NAMESPACE, follow_config_map};
use objects::{Listing, Objects};
pub(crate) use resume::own_listing;
use slim::SlimObject;

/// One kind the informers keep.
struct Kind {
    resource: ApiResource,
    objects: Arc<Objects>,
    namespaced: bool,
}

/// What of an object lookups read, by kind.
#[derive(Clone, Copy)]
enum Reads {
    /// Services: labels and annotations (`openyurt.io/topologyKeys`, …).
    LabelsAndAnnotations,
    /// Nodes: labels only (their status changes every heartbeat).
    Labels,
    /// NodePools: labels and `status.nodes`.
    LabelsAndMembers,
}

/// Changes announced and not yet taken that a receiver may lag behind by; one that lags
/// further is told so, and takes it as "anything may have changed".
const ANNOUNCED: usize = 1024;

/// A re-list that changed more objects than this is announced as a change of the whole kind.
const MOST_KEYS_ANNOUNCED: usize = 64;

/// How long after the informers start filtered responses wait for them to sync
/// ([`Informers::until_synced`]), and start-up waits before it is over
/// ([`crate::config::Config::after_start`]): without the cloud and a cache they cannot.
pub const START_UP_SYNC: Duration = Duration::from_secs(30);

/// The gateway's informers.
pub struct Informers {
    kinds: Vec<Kind>,
    /// [`Lookup::epoch`]: events the informers have begun to apply.
    epoch: Arc<AtomicU64>,
    synced: watch::Receiver<bool>,
    /// When they started: start-up is over [`START_UP_SYNC`] later.
    started: Instant,
    changes: broadcast::Sender<LookupChange>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Informers {
    /// Starts informers that reach the cluster through the gateway's proxy at `proxy`, each
    /// resumed from what `cache` (the gateway's store) persisted of it, when it holds that.
    pub fn start(
        proxy: SocketAddr,
        cache: Option<Arc<dyn CacheStore>>,
    ) -> Result<Informers, kube::Error> {
        let client = client_through(proxy, "informer")?;

        let (synced_tx, synced) = watch::channel(false);
        let (changes, _) = broadcast::channel(ANNOUNCED);
        let synced_tx = Arc::new(synced_tx);
        let flags: Arc<[AtomicBool; KINDS]> = Arc::new(Default::default());
        let epoch = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let specs = [
            (
                ("", "v1", "Service", "services"),
                true,
                false,
                Reads::LabelsAndAnnotations,
            ),
            (("", "v1", "Node", "nodes"), false, false, Reads::Labels),
            // Optional: a cluster without OpenYurt has no NodePool CRD.
            (
                ("apps.openyurt.io", "v1beta1", "NodePool", "nodepools"),
                false,
                true,
                Reads::LabelsAndMembers,
            ),
        ];
        let mut kinds = Vec::new();
        let mut tasks = Vec::new();
        for (index, ((group, version, kind, plural), namespaced, optional, reads)) in
            specs.into_iter().enumerate()
        {
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, kind),
                plural,
            );
            let objects = Arc::new(Objects::default());
            let api: Api<SlimObject> = Api::all_with(client.clone(), &resource);
            let began = Arc::new(AtomicU64::new(0));
            let watch = Watching {
                index,
                optional,
                plural,
                reads,
                objects: objects.clone(),
                began: began.clone(),
                flags: flags.clone(),
                all_synced: synced_tx.clone(),
                start_up_over: started + START_UP_SYNC,
                changes: changes.clone(),
            };
            let cache = cache.clone();
            let persisted_of = resource.clone();
            // Counted before the event is applied: a lookup that reads what it changed sees
            // the count past the change's.
            let epoch = epoch.clone();
            let begin = move |_: &Result<watcher::Event<SlimObject>, watcher::Error>| {
                began.store(epoch.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            };
            tasks.push(tokio::spawn(async move {
                let persisted = match cache {
                    Some(cache) => tokio::task::spawn_blocking(move || {
                        resume::persisted(cache.as_ref(), &persisted_of)
                    })
                    .await
                    .ok()
                    .flatten(),
                    None => None,
                };
                let listing = watcher(api.clone(), watcher::Config::default().any_semantic());
                match persisted {
                    Some(persisted) => {
                        let resumed = resume::resume(api, persisted, plural).chain(listing);
                        let stream = resumed.backoff(ListBackoff::default());
                        let stream = stream.inspect(begin);
                        watch.run(stream).await;
                    }
                    None => {
                        let stream = listing.backoff(ListBackoff::default());
                        let stream = stream.inspect(begin);
                        watch.run(stream).await;
                    }
                }
            }));
            kinds.push(Kind {
                resource,
                objects,
                namespaced,
            });
        }
        Ok(Informers {
            kinds,
            epoch,
            synced,
            started,
            changes,
            tasks,
        })
    }

    /// Whether every kind has been listed (or is absent from the cluster).
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Follows whether every kind has been listed (or found absent from the cluster).
    pub fn sync_state(&self) -> watch::Receiver<bool> {
        self.synced.clone()
    }

    /// Resolves once every kind has been listed (or found absent from the cluster).
    #[cfg(test)]
    pub async fn synced(&self) {
        let mut synced = self.synced.clone();
        // The sender lives as long as the informers' tasks; without it nothing will sync.
        let _ = synced.wait_for(|synced| *synced).await;
    }

    /// A wait until every kind has been listed or start-up is over ([`START_UP_SYNC`] after
    /// the informers started), whichever comes first; `None` when neither is ahead. A
    /// filtered response waits so (as YurtHub's filters wait for their informers' caches):
    /// before the first list a filter's lookups find nothing, so it would judge objects by
    /// what is not there, and every object it judged would be filtered and sent again when
    /// the list lands.
    pub fn until_synced(&self) -> Option<impl Future<Output = ()> + Send + use<>> {
        let over = self.started + START_UP_SYNC;
        if self.is_synced() || Instant::now() >= over {
            return None;
        }
        let mut synced = self.synced.clone();
        Some(async move {
            // The sender lives as long as the informers' tasks; without it nothing syncs.
            let listed = async move { synced.wait_for(|synced| *synced).await.is_ok() };
            let _ = tokio::time::timeout_at(over, listed).await;
        })
    }

    /// The changes to what lookups depend on, from now on, object by object.
    pub fn changes(&self) -> broadcast::Receiver<LookupChange> {
        self.changes.subscribe()
    }

    /// A label of node `name`, if the node is known.
    pub fn node_label(&self, name: &str, label: &str) -> Option<String> {
        self.kinds.get(1)?.objects.label(&format!("/{name}"), label)
    }

    fn kind(&self, group: &str, resource: &str) -> Option<&Kind> {
        self.kinds.get(self.index(group, resource)?)
    }

    fn index(&self, group: &str, resource: &str) -> Option<usize> {
        self.kinds
            .iter()
            .position(|k| k.resource.group == group && k.resource.plural == resource)
    }
}

impl Drop for Informers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// How many kinds the informers keep.
const KINDS: usize = 3;

/// The loop that drives one kind's informer: applies its events to the kind's objects, and
/// keeps its readiness and what lookups read of each object.
struct Watching {
    index: usize,
    optional: bool,
    plural: &'static str,
    reads: Reads,
    /// What lookups read of the kind, applied here.
    objects: Arc<Objects>,
    /// The epoch the event being handled began at.
    began: Arc<AtomicU64>,
    /// Per kind: listed at least once, or known to be absent from the cluster.
    flags: Arc<[AtomicBool; KINDS]>,
    all_synced: Arc<watch::Sender<bool>>,
    /// Until then filtered responses wait for every kind's first list
    /// ([`Informers::until_synced`]).
    start_up_over: Instant,
    changes: broadcast::Sender<LookupChange>,
}

impl Watching {
    async fn run(
        self,
        stream: impl futures_util::Stream<Item = Result<watcher::Event<SlimObject>, watcher::Error>>,
    ) {
        let mut relevant: HashMap<String, u64> = HashMap::new();
        let mut listing: Option<(HashMap<String, u64>, Listing)> = None;
        let mut told_absent = false;
        futures_util::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init) => listing = Some(Default::default()),
                Ok(watcher::Event::InitApply(object)) => {
                    if let Some((hashes, objects)) = listing.as_mut() {
                        let (key, hash) = (key(&object), relevance(&object, self.reads));
                        let (labels, json) = encode(object);
                        hashes.insert(key.clone(), hash);
                        objects.insert(key, labels, json);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    let (listed, objects) = listing.take().unwrap_or_default();
                    self.objects.replace(objects);
                    // Read after the objects are in: a response filtered from then on
                    // reads them.
                    let first = !self.flags[self.index].load(Ordering::Acquire);
                    let unread = first && Instant::now() < self.start_up_over;
                    match changed_keys(&relevant, &listed) {
                        // The first list, while filtered responses still wait for it: no
                        // filter has read this kind yet, so there is nothing to filter anew.
                        _ if unread => {}
                        Some(keys) => keys.into_iter().for_each(|key| self.announce(Some(key))),
                        None => self.announce(None),
                    }
                    relevant = listed;
                    self.mark_synced();
                }
                Ok(watcher::Event::Apply(object)) => {
                    let (key, hash) = (key(&object), relevance(&object, self.reads));
                    let (labels, json) = encode(object);
                    self.objects.apply(key.clone(), labels, json);
                    if relevant.insert(key.clone(), hash) != Some(hash) {
                        self.announce(Some(&key));
                    }
                }
                Ok(watcher::Event::Delete(object)) => {
                    let key = key(&object);
                    self.objects.delete(&key);
                    if relevant.remove(&key).is_some() {
                        self.announce(Some(&key));
                    }
                }
                Err(error) => {
                    let absent = matches!(&error, watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404);
                    if absent && self.optional {
                        if !told_absent {
                            tracing::info!(
                                resource = self.plural,
                                "not in this cluster; lookups of it find nothing"
                            );
                            told_absent = true;
                        }
                        self.mark_synced();
                    } else {
                        tracing::warn!(resource = self.plural, %error, "informer error; retrying");
                    }
                }
            }
        }
    }

    fn mark_synced(&self) {
        self.flags[self.index].store(true, Ordering::Release);
        let now = self.flags.iter().all(|f| f.load(Ordering::Acquire));
        self.all_synced
            .send_if_modified(|all| std::mem::replace(all, now) != now);
    }

    /// Announces a change of the object `key`, or of any (`None`).
    fn announce(&self, key: Option<&str>) {
        let feed = u32::try_from(self.index).unwrap_or(u32::MAX);
        // No receiver: no open watch to end.
        let _ = self.changes.send(LookupChange {
            feed,
            key: key.map(Arc::from),
            epoch: self.began.load(Ordering::SeqCst),
        });
    }
}

/// The keys whose relevance differs between two listings (in either), or `None` when more
/// than [`MOST_KEYS_ANNOUNCED`] do.
fn changed_keys<'a>(
    before: &'a HashMap<String, u64>,
    after: &'a HashMap<String, u64>,
) -> Option<Vec<&'a str>> {
    let changed = after
        .iter()
        .filter(|(key, hash)| before.get(*key) != Some(hash))
        .map(|(key, _)| key.as_str())
        .chain(
            before
                .keys()
                .filter(|key| !after.contains_key(*key))
                .map(String::as_str),
        );
    let keys: Vec<&str> = changed.take(MOST_KEYS_ANNOUNCED + 1).collect();
    (keys.len() <= MOST_KEYS_ANNOUNCED).then_some(keys)
}

/// An object's labels and JSON, as [`Objects`] keeps them.
fn encode(object: SlimObject) -> (BTreeMap<String, String>, Bytes) {
    (object.metadata.labels.unwrap_or_default(), object.json)
}

fn key(object: &SlimObject) -> String {
    format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The hash of what lookups read of an object, by kind.
fn relevance(object: &SlimObject, reads: Reads) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    key(object).hash(&mut hasher);
    object.metadata.labels.hash(&mut hasher);
    // Without the bookkeeping annotations ([`SlimObject`]).
    if let Reads::LabelsAndAnnotations = reads {
        object.metadata.annotations.hash(&mut hasher);
    }
    if let (Reads::LabelsAndMembers, Some(members)) = (reads, &object.members) {
        members.hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
#[path = "informer/tests.rs"]
mod tests;
