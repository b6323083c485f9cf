use std::sync::Arc;
use std::task::Context;

use bytes::Bytes;

use super::{ListTee, WatchTee};
use crate::cache::CacheMetrics;
use crate::cache::budget::{FIRST_LIST_BYTES, IN_FLIGHT_BYTES};
use crate::cache::facade::Cache;
use crate::cache::key::{ResourceKey, SetKey};
use crate::cache::policy::CachePolicy;
use crate::cache::redb_store::RedbStore;
use crate::cache::store::Store;
use crate::stream::{Event, EventType, ListEnd, ListSink, Stop, WatchSink};

fn services() -> SetKey {
    let resource = ResourceKey {
        component: "kube-proxy".into(),
        resource: "services".into(),
        version: "v1".into(),
        group: String::new(),
    };
    SetKey::new(resource, "", "", "")
}

/// A tee for the first page of a list of `services()`.
fn list_tee(cache: &Cache) -> ListTee {
    cache.list_tee(services(), None).unwrap()
}

fn end() -> ListEnd {
    ListEnd {
        kind: "ServiceList".into(),
        api_version: "v1".into(),
        resource_version: "7".into(),
        continue_token: String::new(),
    }
}

const OBJECT: &[u8] = br#"{"metadata":{"name":"web","namespace":"a","resourceVersion":"7"}}"#;
const OTHER: &[u8] = br#"{"metadata":{"name":"api","namespace":"a","resourceVersion":"7"}}"#;
const WEB_KEY: &str = "kube-proxy/services.v1.core/a/web";

fn started() -> (tempfile::TempDir, Arc<RedbStore>, Arc<Cache>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(RedbStore::open(dir.path()).unwrap());
    let cache = Cache::start(
        store.clone(),
        CachePolicy::new(&["*"]),
        CacheMetrics::default(),
    );
    (dir, store, cache)
}

/// All of the first lists' room, as a writer that has fallen behind leaves it.
fn all_first_list_room(cache: &Cache) -> tokio::sync::OwnedSemaphorePermit {
    cache
        .budget()
        .try_first_list(FIRST_LIST_BYTES)
        .expect("the room is free at first")
}

/// Lists `objects` through a tee, as the list pipeline does: ready before every read.
async fn list(cache: &Arc<Cache>, objects: &[&'static [u8]]) {
    let mut tee = list_tee(cache);
    for object in objects {
        std::future::poll_fn(|cx| tee.poll_ready(cx)).await;
        tee.list_item(&Bytes::from_static(object));
    }
    std::future::poll_fn(|cx| tee.poll_ready(cx)).await;
    tee.list_end(end());
}

#[tokio::test]
async fn a_re_list_the_writer_has_no_room_for_is_given_up_and_the_set_kept() {
    let (_dir, store, cache) = started();
    list(&cache, &[OBJECT]).await;
    cache.flush();
    assert_eq!(cache.metrics().commits.get(), 1);

    let all_room = cache
        .budget()
        .try_shared(IN_FLIGHT_BYTES)
        .expect("the room is free at first");
    list(&cache, &[OTHER]).await;
    cache.flush();
    assert_eq!(cache.metrics().aborted.get(), 1, "a re-list does not wait");
    assert_eq!(cache.metrics().refused.get(), 1);
    assert_eq!(cache.metrics().list_waits.get(), 0);
    assert!(
        store.get(WEB_KEY).unwrap().is_some(),
        "the set held is kept"
    );

    drop(all_room);
    list(&cache, &[OTHER]).await;
    cache.flush();
    assert_eq!(cache.metrics().commits.get(), 2);
    assert!(
        store.get(WEB_KEY).unwrap().is_none(),
        "replaced by the re-list"
    );
    cache.close();
}

#[tokio::test]
async fn a_first_list_waits_for_the_writer_instead_of_being_given_up() {
    let (_dir, store, cache) = started();
    let all_room = all_first_list_room(&cache);
    let mut tee = list_tee(&cache);
    tee.list_item(&Bytes::from_static(OBJECT));
    tee.list_item(&Bytes::from_static(OTHER));
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(tee.poll_ready(&mut cx).is_pending(), "no room yet");
    assert_eq!(cache.metrics().list_waits.get(), 1);

    drop(all_room);
    std::future::poll_fn(|cx| tee.poll_ready(cx)).await;
    tee.list_end(end());
    cache.flush();
    assert_eq!(cache.metrics().commits.get(), 1);
    assert_eq!(cache.metrics().aborted.get(), 0);
    assert!(store.get(WEB_KEY).unwrap().is_some());
    assert_eq!(store.scan("").unwrap().count(), 2, "both items, none lost");
    cache.close();
}

#[tokio::test(start_paused = true)]
async fn a_first_list_is_given_up_when_the_writer_makes_no_room_in_time() {
    let (_dir, store, cache) = started();
    let _all_room = all_first_list_room(&cache);
    list(&cache, &[OBJECT]).await;
    cache.flush();
    assert_eq!(cache.metrics().aborted.get(), 1);
    assert!(store.sets("").unwrap().is_empty());
    cache.close();
}

#[test]
fn a_first_list_that_ends_with_items_waiting_is_not_committed() {
    let (_dir, store, cache) = started();
    let all_room = all_first_list_room(&cache);
    let mut tee = list_tee(&cache);
    tee.list_item(&Bytes::from_static(OBJECT));
    tee.list_end(end());
    drop(all_room);
    cache.flush();
    assert!(store.sets("").unwrap().is_empty());
    assert_eq!(cache.metrics().aborted.get(), 1);
    cache.close();
}

#[test]
fn a_list_whose_client_went_away_is_not_committed() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(RedbStore::open(dir.path()).unwrap());
    let cache = Cache::start(
        store.clone(),
        CachePolicy::new(&["*"]),
        CacheMetrics::default(),
    );
    let mut tee = list_tee(&cache);
    tee.list_item(&Bytes::from_static(OBJECT));
    drop(tee);
    cache.flush();
    assert!(store.sets("").unwrap().is_empty());
    assert!(
        store.scan("").unwrap().next().is_none(),
        "nothing staged reached the objects"
    );
    cache.close();
}

fn watch_event(kind: EventType, rv: u32) -> Event {
    Event {
        kind,
        object: Bytes::from(format!(
            r#"{{"metadata":{{"name":"web","namespace":"a","resourceVersion":"{rv}"}}}}"#
        )),
    }
}

fn watch_tee(cache: &Cache) -> WatchTee {
    cache.watch_tee(services())
}

#[tokio::test]
async fn a_watch_event_without_room_makes_the_set_stale_and_ends_the_watch() {
    let (dir, store, cache) = started();
    list(&cache, &[OBJECT]).await;
    let mut watch = watch_tee(&cache);
    assert_eq!(watch.event(&watch_event(EventType::Modified, 8)), None);
    cache.flush();
    assert_eq!(store.sets("").unwrap()[0].1.resource_version, "8");

    let all_room = cache
        .budget()
        .try_shared(IN_FLIGHT_BYTES)
        .expect("the room is free at first");
    let stop = watch.event(&watch_event(EventType::Modified, 9));
    assert!(
        matches!(stop, Some(Stop::Relist(_))),
        "the client must re-list: {stop:?}"
    );
    drop(all_room);
    // Another watch of the set goes on: the objects move on, the set's version not.
    let mut other = watch_tee(&cache);
    assert_eq!(other.event(&watch_event(EventType::Modified, 10)), None);
    cache.close();
    drop((watch, other, cache, store));

    let store = RedbStore::open(dir.path()).unwrap();
    let meta = store.sets("").unwrap()[0].1.clone();
    assert_eq!(
        (meta.resource_version.as_str(), meta.stale),
        ("8", true),
        "synced no further than before the hole, after a restart too"
    );
}

#[test]
fn a_later_page_without_its_first_is_not_teed() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(RedbStore::open(dir.path()).unwrap());
    let cache = Cache::start(store, CachePolicy::new(&["*"]), CacheMetrics::default());
    assert!(
        cache
            .list_tee(services(), Some("never-seen".into()))
            .is_none()
    );
    cache.close();
}

/// A gate a store's writes wait at while it is closed, as a writer's behind a slow disk.
#[derive(Default)]
struct Gate {
    closed: std::sync::Mutex<bool>,
    changed: std::sync::Condvar,
}

impl Gate {
    fn set_closed(&self, closed: bool) {
        *self.closed.lock().unwrap() = closed;
        self.changed.notify_all();
    }

    fn pass(&self) {
        let closed = self.closed.lock().unwrap();
        drop(self.changed.wait_while(closed, |closed| *closed).unwrap());
    }
}

/// A read of the cache after a watch sent its client an event waits until the event is in
/// the store: an object the client saw deleted is not listed to it again.
#[tokio::test]
async fn a_read_after_an_event_was_teed_waits_until_the_event_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::default());
    let store = Arc::new(crate::cache::hooked::Hooked {
        store: RedbStore::open(dir.path()).unwrap(),
        before_apply: {
            let gate = gate.clone();
            move || gate.pass()
        },
    });
    let cache = Cache::start(
        store.clone(),
        CachePolicy::new(&["*"]),
        CacheMetrics::default(),
    );
    list(&cache, &[OBJECT]).await;
    cache.flush();
    gate.set_closed(true);
    let mut watch = watch_tee(&cache);
    assert_eq!(watch.event(&watch_event(EventType::Deleted, 8)), None);
    let mut applied = std::pin::pin!(cache.applied());
    assert!(
        futures_util::poll!(applied.as_mut()).is_pending(),
        "caught up before the writer could apply the event"
    );
    assert!(store.get(WEB_KEY).unwrap().is_some(), "not applied yet");
    gate.set_closed(false);
    applied.await;
    assert_eq!(store.get(WEB_KEY).unwrap(), None, "the deletion is applied");
    cache.close();
}
