//! Garbage collection: a component the node no longer runs stops being served, and its
//! cache is removed once it has not been used for `--cache-gc-after` of the gateway's
//! running time, and only while the cloud is reachable. (YurtHub never does.) Time the node
//! was off never counts: a node powered off for longer than that and booted without the
//! cloud needs its cache most.

use std::time::Duration;

use super::facade::Cache;
use super::store::Store;

/// Removes every component unused for `after` of running time, when `cloud_reachable`
/// (otherwise nothing: its cache may be all the node has); returns their names.
pub fn collect_garbage(cache: &Cache, after: Duration, cloud_reachable: bool) -> Vec<String> {
    if !cloud_reachable {
        tracing::debug!("the cloud is unreachable: no cache is collected");
        return Vec::new();
    }
    let store: &dyn Store = cache.store().as_ref();
    let cutoff = cache.running_secs().saturating_sub(after.as_secs());
    let components = match store.components() {
        Ok(components) => components,
        Err(error) => {
            tracing::warn!(error = %crate::error::error_chain(&error), "cannot list cached components");
            return Vec::new();
        }
    };
    let mut removed = Vec::new();
    for (component, written) in components {
        // The store has its use of up to an hour ago; this run knows the latest, and
        // whether a response to it is being served.
        let outcome = cache.collect_unused(&component, written, cutoff, || {
            cache.remove_component(&component)
        });
        match outcome {
            None => {}
            Some(Ok(objects)) => {
                tracing::info!(%component, objects, "removed the cache of a component unused for over {} s of running time", after.as_secs());
                cache.metrics().collected.inc();
                removed.push(component);
            }
            Some(Err(error)) => {
                tracing::warn!(%component, error = %crate::error::error_chain(&error), "cannot remove a component's cache");
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cache::CacheMetrics;
    use crate::cache::StoreWriter;
    use crate::cache::policy::CachePolicy;
    use crate::cache::redb_store::RedbStore;
    use crate::cache::store::WriteOp;

    const WEEK: Duration = Duration::from_secs(7 * 24 * 3600);

    #[tokio::test(start_paused = true)]
    async fn only_running_time_with_the_cloud_reachable_collects_a_component() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RedbStore::open(dir.path()).unwrap());
        // As a gateway that ran 100 s, serving kubelet at the end, then was powered off for
        // however long: what the store holds at the next start.
        store
            .apply(
                &[
                    WriteOp::Touch {
                        component: "kubelet".into(),
                        at: 100,
                    },
                    WriteOp::Running { secs: 100 },
                ],
                true,
            )
            .unwrap();
        let cache = Cache::start(
            store.clone(),
            CachePolicy::new(&["*"]),
            CacheMetrics::default(),
        );
        assert!(
            collect_garbage(&cache, WEEK, true).is_empty(),
            "the time the node was off does not count"
        );

        tokio::time::advance(WEEK + Duration::from_secs(1)).await;
        assert!(
            collect_garbage(&cache, WEEK, false).is_empty(),
            "nothing is collected while the cloud is unreachable"
        );
        assert_eq!(collect_garbage(&cache, WEEK, true), ["kubelet"]);
        cache.close();
        assert!(
            store.running_secs().unwrap() >= 100 + WEEK.as_secs(),
            "the running time is kept for the next start"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_component_served_within_the_period_is_kept_though_its_use_is_recorded_hourly() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RedbStore::open(dir.path()).unwrap());
        let cache = Cache::start(store, CachePolicy::new(&["*"]), CacheMetrics::default());
        let after = Duration::from_secs(600);
        cache.touch("kubelet");
        tokio::time::advance(Duration::from_secs(900)).await;
        // Served again, within the hour in which its use is not written again.
        cache.touch("kubelet");
        tokio::time::advance(Duration::from_secs(300)).await;
        cache.flush();
        assert!(
            collect_garbage(&cache, after, true).is_empty(),
            "kubelet was served 300 s ago"
        );
        tokio::time::advance(Duration::from_secs(301)).await;
        assert_eq!(collect_garbage(&cache, after, true), ["kubelet"]);

        // Collected, then served again within that hour: the use is written at once, so
        // the cache it builds anew is collected in turn once unused.
        cache.touch("kubelet");
        cache.flush();
        let components = cache.store().components().unwrap();
        assert_eq!(components, [("kubelet".to_owned(), 1501)]);
        cache.close();
    }

    #[tokio::test(start_paused = true)]
    async fn a_component_in_use_has_a_recent_use_stored_however_short_the_gc_after() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RedbStore::open(dir.path()).unwrap());
        let cache = Cache::start(store, CachePolicy::new(&["*"]), CacheMetrics::default());
        let after = Duration::from_secs(60);
        cache.collect_after(after);
        // Served every 10 s for ten minutes; the gateway may restart after any request, and
        // then only the stored use tells GC that kubelet is in use.
        for _ in 0..60 {
            cache.touch("kubelet");
            tokio::time::advance(Duration::from_secs(10)).await;
            cache.flush();
            let now = cache.running_secs();
            let stored = cache.store().components().unwrap();
            let written = stored
                .iter()
                .find(|(c, _)| c == "kubelet")
                .map(|(_, at)| *at);
            assert!(
                written.is_some_and(|at| now.saturating_sub(at) < after.as_secs()),
                "kubelet is served every 10 s, yet its stored use is {written:?} at {now} s"
            );
            assert!(collect_garbage(&cache, after, true).is_empty());
        }
        cache.close();
    }

    #[tokio::test(start_paused = true)]
    async fn a_component_served_by_a_long_watch_is_not_collected_while_it_lasts() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RedbStore::open(dir.path()).unwrap());
        let cache = Cache::start(store, CachePolicy::new(&["*"]), CacheMetrics::default());
        let after = Duration::from_secs(60);
        cache.collect_after(after);
        let set = crate::cache::SetKey::new(
            crate::cache::ResourceKey {
                component: "kube-proxy".into(),
                resource: "services".into(),
                version: "v1".into(),
                group: String::new(),
            },
            "",
            "",
            "",
        );
        let watch = cache.watch_tee(set);
        cache.flush();
        // A quiet watch of ten minutes: no event, no other request.
        tokio::time::advance(Duration::from_secs(600)).await;
        assert!(
            collect_garbage(&cache, after, true).is_empty(),
            "kube-proxy is being served"
        );
        drop(watch);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(
            collect_garbage(&cache, after, true).is_empty(),
            "its watch ended 60 s ago: its last use"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(collect_garbage(&cache, after, true), ["kube-proxy"]);
        cache.close();
    }

    #[test]
    fn last_uses_of_a_store_without_a_running_clock_count_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = RedbStore::open(dir.path()).unwrap();
            store
                .apply(
                    &[WriteOp::Touch {
                        component: "kubelet".into(),
                        at: 1_700_000_000,
                    }],
                    true,
                )
                .unwrap();
            store.forget_running_clock();
        }
        let store = RedbStore::open(dir.path()).unwrap();
        assert_eq!(store.running_secs().unwrap(), 0);
        assert_eq!(store.components().unwrap(), [("kubelet".to_owned(), 0)]);
    }
}
