//! The gateway's own upkeep around the requests it serves: the start-up code given back,
//! freed memory handed back, unused components' caches removed, and the filter settings
//! made from the configuration.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::hooks::Hooks;
use crate::cache::Cache;
use crate::config::Config;
use crate::filter::{FilterSettings, Limits};
use crate::node::informer::Informers;
use crate::node::multiplexer::{Multiplexer, READY_WITHIN};
use crate::upstream::HealthWatch;

/// How often the memory the process freed is handed back ([`Hooks::return_freed_memory`]).
pub const RETURN_FREED_EVERY: Duration = Duration::from_secs(5);

/// How long the start-up code waits for the multiplexer's first lists before it is given
/// back all the same: a list that fails again and again after some data never ends the wait
/// by itself, and a thin link's first lists take a minute or two.
const FIRST_LISTS_WITHIN: Duration = Duration::from_secs(180);

/// How often unused components' caches are looked for.
const GC_EVERY: Duration = Duration::from_secs(3600);

/// The process's own upkeep, as the binary asks for it: the code only start-up ran given
/// back once start-up is over (the informers synced, then the multiplexer's first lists
/// in, whose code runs once), and freed memory handed back every [`RETURN_FREED_EVERY`].
pub(super) fn upkeep(
    hooks: Hooks,
    informers: Option<Arc<Informers>>,
    multiplexer: Option<Arc<Multiplexer>>,
) -> Vec<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>> {
    let mut tasks: Vec<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>> = Vec::new();
    if let Some(after_start) = hooks.after_start {
        tasks.push(Box::pin(async move {
            if let Some(until_synced) = informers.and_then(|i| i.until_synced()) {
                until_synced.await;
            }
            if let Some(multiplexer) = multiplexer {
                let _ = tokio::time::timeout(
                    FIRST_LISTS_WITHIN,
                    multiplexer.until_listed(READY_WITHIN),
                )
                .await;
            }
            let _ = tokio::task::spawn_blocking(after_start).await;
        }));
    }
    if let Some(hand_back) = hooks.return_freed_memory {
        tasks.push(Box::pin(async move {
            let mut every = tokio::time::interval(RETURN_FREED_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let _ = tokio::task::spawn_blocking(hand_back).await;
            }
        }));
    }
    tasks
}

pub(super) fn filter_settings(config: &Config, hooks: Hooks) -> FilterSettings {
    FilterSettings {
        dir: config.filter_dir.clone(),
        config_file: config.filter_config.clone(),
        compiled_cache_dir: config
            .disk_cache_path
            .join(crate::filter::COMPILED_CACHE_DIR),
        helper: config.filter_helper.clone(),
        after_load: hooks.return_freed_memory,
        node_name: config.node_name.clone().unwrap_or_default(),
        node_pool: config.nodepool_name.clone(),
        limits: Limits::default(),
        debounce: crate::filter::DEFAULT_DEBOUNCE,
        disabled: config.disabled_filters.clone(),
    }
}

/// Removes unused components' caches, at start and then every [`GC_EVERY`], while some
/// apiserver is healthy.
pub(super) async fn collect_garbage(cache: Arc<Cache>, after: Duration, health: HealthWatch) {
    let mut every = tokio::time::interval(GC_EVERY);
    loop {
        every.tick().await;
        let cache = cache.clone();
        let reachable = *health.borrow();
        let _ = tokio::task::spawn_blocking(move || {
            crate::cache::collect_garbage(&cache, after, reachable)
        })
        .await;
    }
}
