use std::sync::Arc;

use super::*;
use crate::cache::RedbStore;

fn cache(dir: &std::path::Path) -> Arc<Cache> {
    let store = RedbStore::open(dir).unwrap();
    Cache::start(
        Arc::new(store),
        CachePolicy::new(&["kubelet".to_owned()]),
        CacheMetrics::default(),
    )
}

#[tokio::test]
async fn local_versions_rise_past_the_floor_and_every_earlier_one_but_never_past_the_cloud() {
    let dir = tempfile::tempdir().unwrap();
    let cache = cache(dir.path());
    cache.saw_cloud_version(50);
    assert_eq!(cache.next_local_version(10), 11);
    assert_eq!(
        cache.next_local_version(10),
        12,
        "newer than the last one given"
    );
    assert_eq!(cache.next_local_version(30), 31);
    assert_eq!(cache.next_local_version(49), 50);
    assert_eq!(
        cache.next_local_version(20),
        50,
        "no room left past the cloud"
    );
    assert_eq!(
        cache.next_local_version(60),
        60,
        "an object newer than the cloud's clock"
    );
    cache.saw_cloud_version(70);
    assert_eq!(cache.next_local_version(0), 61);
}

#[tokio::test]
async fn both_clocks_are_kept_over_a_restart_by_the_local_writes() {
    let dir = tempfile::tempdir().unwrap();
    let first = cache(dir.path());
    first.saw_cloud_version(500);
    assert_eq!(first.next_local_version(100), 101);
    assert_eq!(first.next_local_version(100), 102);
    first.write_local(Vec::new(), Vec::new()).await.unwrap();
    first.close();
    drop(first);
    let again = cache(dir.path());
    assert_eq!(again.cloud_version(), 500);
    assert_eq!(
        again.next_local_version(100),
        103,
        "no version given before the restart is given again"
    );
}
