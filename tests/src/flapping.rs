//! A flapping link's watchers and what is checked after it: kube-rs reflectors of ConfigMaps
//! and Services of one namespace, as several cached components, through a gateway; the
//! cloud's churn ([`cloud`]); the schedule of the cuts; the gateway's resources ([`usage`]). Shared by
//! the e2e test (`tests/e2e/flapping.rs`, a relay cut) and the node's (`tests/node/flapping.rs`,
//! the node's link cut).

pub mod cloud;
mod usage;

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};

use crate::process::wait_until;
pub use usage::{Metrics, SETTLED_WITHIN, Usage};

/// The components the reflectors speak as (cached, as `--cache-agents` says).
pub const AGENTS: [&str; 4] = ["flap-a", "flap-b", "flap-c", "flap-d"];

/// How long the link flaps: `default_seconds` (the suite's), `EDGEGATE_FLAP_SECONDS` for
/// longer runs.
pub fn flapping_for(default_seconds: u64) -> Duration {
    let seconds = std::env::var("EDGEGATE_FLAP_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_seconds);
    Duration::from_secs(seconds)
}

/// Cuts (`set(false)`) and restores (`set(true)`) a link for `flapping`: every 2 s for the
/// first half, then down and up for 0.2–4 s at random; leaves it up. The number of cuts.
pub fn flap(flapping: Duration, mut set: impl FnMut(bool) -> Result<()>) -> Result<usize> {
    let started = Instant::now();
    let mut cuts = 0;
    while started.elapsed() < flapping {
        let (down, up) = if started.elapsed() < flapping / 2 {
            (Duration::from_secs(2), Duration::from_secs(2))
        } else {
            let spread = Duration::from_millis(3800);
            (
                Duration::from_millis(200) + random_below(spread),
                Duration::from_millis(200) + random_below(spread),
            )
        };
        set(false)?;
        cuts += 1;
        std::thread::sleep(down);
        set(true)?;
        std::thread::sleep(up);
    }
    Ok(cuts)
}

/// A duration below `window`, at random.
pub fn random_below(window: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX).max(1);
    Duration::from_nanos(random % nanos)
}

/// The kind and plural reflector `i` watches.
pub fn kind_of(i: usize) -> (&'static str, &'static str) {
    if i % 4 == 3 {
        ("Service", "services")
    } else {
        ("ConfigMap", "configmaps")
    }
}

/// What one reflector holds and has seen.
#[derive(Default)]
pub struct Seen {
    /// `kind/name → resourceVersion`, as its store holds them.
    store: BTreeMap<String, u64>,
    /// The objects of a re-list in progress.
    listing: BTreeMap<String, u64>,
    /// The highest resourceVersion seen of each object, deleted ones included.
    highest: BTreeMap<String, u64>,
    /// Objects seen at a lower resourceVersion than before.
    backwards: Vec<String>,
    relists: usize,
    /// What it was told, in order, for a failure's message.
    log: Vec<String>,
}

impl Seen {
    fn saw(&mut self, key: &str, rv: u64) {
        let highest = self.highest.entry(key.to_owned()).or_default();
        if rv < *highest {
            self.backwards
                .push(format!("{key} at {rv} after {highest}"));
        }
        *highest = rv.max(*highest);
    }

    fn step(&mut self, kind: &str, event: watcher::Event<DynamicObject>) {
        let key_rv = |object: &DynamicObject| {
            let key = format!(
                "{kind}/{}",
                object.metadata.name.as_deref().unwrap_or_default()
            );
            let rv = object
                .metadata
                .resource_version
                .as_deref()
                .and_then(|rv| rv.parse().ok())
                .unwrap_or_default();
            (key, rv)
        };
        let line = match &event {
            watcher::Event::Apply(o) => format!("apply {}@{}", key_rv(o).0, key_rv(o).1),
            watcher::Event::Delete(o) => format!("delete {}@{}", key_rv(o).0, key_rv(o).1),
            watcher::Event::Init => "init".to_owned(),
            watcher::Event::InitApply(o) => format!("list {}@{}", key_rv(o).0, key_rv(o).1),
            watcher::Event::InitDone => "listed".to_owned(),
        };
        self.log.push(line);
        match event {
            watcher::Event::Apply(object) => {
                let (key, rv) = key_rv(&object);
                self.saw(&key, rv);
                self.store.insert(key, rv);
            }
            watcher::Event::Delete(object) => {
                let (key, rv) = key_rv(&object);
                self.saw(&key, rv);
                self.store.remove(&key);
            }
            watcher::Event::Init => self.listing.clear(),
            watcher::Event::InitApply(object) => {
                let (key, rv) = key_rv(&object);
                self.saw(&key, rv);
                self.listing.insert(key, rv);
            }
            watcher::Event::InitDone => {
                self.store = std::mem::take(&mut self.listing);
                self.relists += 1;
            }
        }
    }
}

/// Reflectors running on a runtime, and what each has seen.
pub struct Reflectors {
    seen: Vec<Arc<Mutex<Seen>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Reflectors {
    /// Spawns `count` reflectors on `rt` watching namespace `ns` through the proxy at `url`
    /// with `token` (none: on the gateway's identity), reflector `i` of kind
    /// [`kind_of`]`(i)` as component `AGENTS[i % 4]`.
    pub fn spawn(
        rt: &tokio::runtime::Runtime,
        url: &str,
        token: Option<&str>,
        ns: &str,
        count: usize,
    ) -> Result<Self> {
        let seen: Vec<Arc<Mutex<Seen>>> = (0..count).map(|_| Arc::default()).collect();
        let mut tasks = Vec::new();
        for (i, seen) in seen.iter().enumerate() {
            let (kind, plural) = kind_of(i);
            let agent = format!("{}/v1", AGENTS[i % AGENTS.len()]);
            let mut config = kube::Config::new(url.parse()?);
            config.auth_info.token = token.map(|token| token.to_owned().into());
            config
                .headers
                .push((http::header::USER_AGENT, agent.parse()?));
            let resource =
                ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", kind), plural);
            // Its connections are made by a task of its own on `rt` (and in `rt`'s network).
            let client = {
                let _rt = rt.enter();
                kube::Client::try_from(config)?
            };
            let seen = seen.clone();
            let ns = ns.to_owned();
            tasks.push(rt.spawn(async move {
                let api: kube::Api<DynamicObject> =
                    kube::Api::namespaced_with(client, &ns, &resource);
                let events = watcher(api, watcher::Config::default()).default_backoff();
                futures_util::pin_mut!(events);
                while let Some(event) = events.next().await {
                    if let Ok(event) = event {
                        lock(&seen).step(kind, event);
                    }
                }
            }));
        }
        Ok(Reflectors { seen, tasks })
    }

    /// Waits until every reflector has listed once.
    pub fn wait_listed(&self, timeout: Duration) -> Result<()> {
        wait_until(timeout, "every reflector to list", || {
            self.seen.iter().all(|s| lock(s).relists > 0)
        })
    }

    /// Whether every reflector's store is `truth`'s objects of its kind, by resourceVersion.
    pub fn match_cloud(&self, truth: &BTreeMap<String, u64>) -> bool {
        self.seen.iter().enumerate().all(|(i, s)| {
            let wanted = of_kind(truth, kind_of(i).0);
            lock(s).store.iter().collect::<BTreeMap<_, _>>() == wanted
        })
    }

    /// Waits until [`Reflectors::match_cloud`], within `timeout`; how long it took. On timeout
    /// the error says how the stores differ.
    pub fn converge(&self, truth: &BTreeMap<String, u64>, timeout: Duration) -> Result<Duration> {
        let started = Instant::now();
        wait_until(
            timeout,
            "every reflector's store to equal the cloud",
            || self.match_cloud(truth),
        )
        .with_context(|| self.differences(truth))?;
        Ok(started.elapsed())
    }

    /// What the reflectors saw going back in resourceVersion.
    pub fn backwards(&self) -> Vec<String> {
        self.seen
            .iter()
            .flat_map(|s| lock(s).backwards.clone())
            .collect()
    }

    /// The lists they made, all together.
    pub fn relists(&self) -> usize {
        self.seen.iter().map(|s| lock(s).relists).sum()
    }

    /// How the reflectors that differ from `truth` differ, for a failure's message.
    pub fn differences(&self, truth: &BTreeMap<String, u64>) -> String {
        let mut out = Vec::new();
        for (i, s) in self.seen.iter().enumerate() {
            let (kind, _) = kind_of(i);
            let s = lock(s);
            let wanted = of_kind(truth, kind);
            let missing: Vec<_> = wanted
                .keys()
                .filter(|k| !s.store.contains_key(**k))
                .collect();
            let extra: Vec<_> = s.store.keys().filter(|k| !wanted.contains_key(k)).collect();
            let stale: Vec<_> = s
                .store
                .iter()
                .filter(|(k, rv)| wanted.get(k).is_some_and(|w| *w != *rv))
                .map(|(k, rv)| format!("{k}@{rv} (cloud {})", wanted[k]))
                .collect();
            if missing.is_empty() && extra.is_empty() && stale.is_empty() {
                continue;
            }
            let odd: Vec<&String> = missing
                .iter()
                .map(|k| **k)
                .chain(extra.iter().copied())
                .collect();
            let told: Vec<&String> = s
                .log
                .iter()
                .filter(|line| odd.iter().any(|k| line.contains(k.as_str())))
                .collect();
            out.push(format!(
                "reflector {i} ({}, {kind}, {} lists): missing {missing:?}, extra {extra:?}, stale {stale:?}; told of them: {told:?}; last told: {:?}",
                AGENTS[i % AGENTS.len()],
                s.relists,
                &s.log[s.log.len().saturating_sub(3)..]
            ));
        }
        format!(
            "{} reflector(s) differ: {}",
            out.len(),
            out[..out.len().min(4)].join("; ")
        )
    }
}

impl Drop for Reflectors {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|p| p.into_inner())
}

fn of_kind<'a>(truth: &'a BTreeMap<String, u64>, kind: &str) -> BTreeMap<&'a String, &'a u64> {
    let prefix = format!("{kind}/");
    truth
        .iter()
        .filter(|(key, _)| key.starts_with(&prefix))
        .collect()
}
