//! The tee into the cache: implements the stream's [`Sink`] for one response, sending what
//! the client received to the writer. It never waits for the writer, but for a set's first
//! list: that one is paced to the writer between upstream reads rather than given up, since
//! without it the cache has nothing to answer for the set when the cloud is away.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;

use super::key::{ResourceKey, SetKey};
use super::policy::CacheTarget;
use super::room::RoomWait;
use super::writer::{Cache, Op};
use crate::stream::{Event, ListEnd, Sink, Stop};

/// What one response feeds.
enum State {
    /// A list page: items are staged under `list`.
    List {
        list: u64,
        set: Arc<SetKey>,
        resource: Arc<ResourceKey>,
        items: u64,
        /// Set when the store does not hold `set` yet: the list waits for room.
        pacing: Option<Pacing>,
    },
    /// A watch of `set`.
    Watch { set: Arc<SetKey> },
    /// A single object of `resource`.
    Object { resource: Arc<ResourceKey> },
    /// Finished or given up.
    Done,
}

/// A first list keeping pace with the writer: the items the client was sent that wait for
/// room, in order, and the wait for the first of them.
#[derive(Default)]
struct Pacing {
    waiting: VecDeque<Bytes>,
    wait: Option<RoomWait>,
}

/// The cache tee of one response.
pub struct CacheTee {
    cache: Arc<Cache>,
    state: State,
    /// The component the response is served to, in use until the tee is dropped.
    serving: Option<String>,
}

impl CacheTee {
    /// A tee for `target`; `None` for a later page of a list whose earlier pages were not
    /// seen (it could never be committed whole).
    pub(crate) fn new(cache: Arc<Cache>, target: CacheTarget) -> Option<CacheTee> {
        let state = match target {
            CacheTarget::List { set, continue_from } => {
                let (list, items) = match continue_from {
                    None => (cache.new_list(), 0),
                    Some(token) => cache.resume_pages(&token)?,
                };
                State::List {
                    list,
                    resource: Arc::new(set.resource.clone()),
                    pacing: (!cache.holds(&set)).then(Pacing::default),
                    set: Arc::new(set),
                    items,
                }
            }
            CacheTarget::Watch(set) => State::Watch { set: Arc::new(set) },
            CacheTarget::Object(resource) => State::Object {
                resource: Arc::new(resource),
            },
        };
        Some(CacheTee {
            cache,
            state,
            serving: None,
        })
    }

    /// This tee's response is served to `component`, in use until the tee is dropped.
    pub(crate) fn serving(mut self, component: &str) -> CacheTee {
        self.serving = Some(component.to_owned());
        self
    }

    fn give_up(&mut self, reason: &str) {
        if let State::List { list, set, .. } = &self.state {
            abort(&self.cache, *list, set, reason);
        }
        self.state = State::Done;
    }
}

/// Tells the writer to drop list `list` of `set`, staged items and all.
fn abort(cache: &Cache, list: u64, set: &SetKey, reason: &str) {
    tracing::debug!(set = %set.encode(), reason, "list not cached");
    cache.send(Op::Abort { list });
    cache.metrics().aborted.inc();
}

/// Hands one item of list `list` to the writer; false when the writer is gone.
fn send_item(
    cache: &Cache,
    list: u64,
    resource: &Arc<ResourceKey>,
    object: Bytes,
    room: tokio::sync::OwnedSemaphorePermit,
) -> bool {
    cache.send(Op::Item {
        list,
        resource: resource.clone(),
        object,
        room,
    })
}

impl Sink for CacheTee {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let State::List {
            list,
            resource,
            pacing: Some(pacing),
            ..
        } = &mut self.state
        else {
            return Poll::Ready(());
        };
        while let Some(bytes) = pacing.waiting.front().map(Bytes::len) {
            let wait = pacing
                .wait
                .get_or_insert_with(|| self.cache.wait_first_list_room(bytes));
            let Poll::Ready(room) = wait.as_mut().poll(cx) else {
                return Poll::Pending;
            };
            pacing.wait = None;
            let (Some(room), Some(object)) = (room, pacing.waiting.pop_front()) else {
                self.give_up("the cache writer made no room in time");
                return Poll::Ready(());
            };
            if !send_item(&self.cache, *list, resource, object, room) {
                self.state = State::Done;
                break;
            }
        }
        Poll::Ready(())
    }

    fn list_item(&mut self, object: &Bytes) {
        let State::List {
            list,
            resource,
            items,
            pacing,
            ..
        } = &mut self.state
        else {
            return;
        };
        // A copy of its own: an item waiting for the writer must not hold the framing
        // buffer it was cut from (and the items around it) beyond the room it took.
        let room = match pacing {
            Some(pacing) => {
                let room = pacing
                    .waiting
                    .is_empty()
                    .then(|| self.cache.first_list_room(object.len()))
                    .flatten();
                let Some(room) = room else {
                    *items += 1;
                    pacing.waiting.push_back(Bytes::copy_from_slice(object));
                    return;
                };
                room
            }
            None => match self.cache.room(object.len()) {
                Some(room) => room,
                None => return self.give_up("the cache writer is behind"),
            },
        };
        *items += 1;
        let object = Bytes::copy_from_slice(object);
        if !send_item(&self.cache, *list, resource, object, room) {
            self.state = State::Done;
        }
    }

    fn list_end(&mut self, end: ListEnd) {
        let State::List {
            list,
            set,
            items,
            pacing,
            ..
        } = std::mem::replace(&mut self.state, State::Done)
        else {
            return;
        };
        if pacing.is_some_and(|pacing| !pacing.waiting.is_empty()) {
            // The pipeline waits for room before every read, so this is a sink misused.
            return abort(
                &self.cache,
                list,
                &set,
                "the list ended with items not handed over",
            );
        }
        if end.continue_token.is_empty() {
            self.cache.send(Op::Commit {
                list,
                set,
                end,
                items,
            });
        } else {
            // More pages follow: the list commits when the last one has arrived.
            self.cache.park_pages(end.continue_token, list, items);
        }
    }

    fn event(&mut self, event: &Event) -> Option<Stop> {
        let State::Watch { set } = &self.state else {
            return None;
        };
        if let Some(room) = self.cache.room(event.object.len()) {
            self.cache.send(Op::Event {
                set: set.clone(),
                event: event.clone(),
                room,
            });
            return None;
        }
        // A lost event (counted as refused) leaves a hole in the set: it stays at its last
        // consistent version until a list of it commits, and this watch ends with a 410 so
        // that its client re-lists now; resuming it would skip the hole for good.
        tracing::warn!(set = %set.encode(), "a watch event could not be cached; the set is stale until re-listed");
        self.cache.send(Op::Lost { set: set.clone() });
        self.state = State::Done;
        Some(Stop::Relist(
            "edgegate: the local cache fell behind this watch; re-list".to_owned(),
        ))
    }

    fn object(&mut self, object: &Bytes) {
        let State::Object { resource } = &self.state else {
            return;
        };
        if let Some(room) = self.cache.room(object.len()) {
            self.cache.send(Op::Object {
                resource: resource.clone(),
                object: object.clone(),
                room,
            });
        }
    }

    fn abort(&mut self, reason: &str) {
        self.give_up(reason);
    }
}

impl Drop for CacheTee {
    fn drop(&mut self) {
        // A list that never reached its end (the client went away) is not committed.
        self.give_up("the response ended early");
        if let Some(component) = self.serving.take() {
            self.cache.note_use(&component, -1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CacheMetrics;
    use crate::cache::key::{ResourceKey, SetKey};
    use crate::cache::policy::CachePolicy;
    use crate::cache::redb_store::RedbStore;
    use crate::cache::store::Store;
    use crate::stream::EventType;

    fn list_target() -> CacheTarget {
        let resource = ResourceKey {
            component: "kube-proxy".into(),
            resource: "services".into(),
            version: "v1".into(),
            group: String::new(),
        };
        CacheTarget::List {
            set: SetKey::new(resource, "", "", ""),
            continue_from: None,
        }
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
            .first_list_room(crate::cache::room::FIRST_LIST_BYTES)
            .expect("the room is free at first")
    }

    /// Lists `objects` through a tee, as the list pipeline does: ready before every read.
    async fn list(cache: &Arc<Cache>, objects: &[&'static [u8]]) {
        let mut tee = cache.tee("kube-proxy", list_target()).unwrap();
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
            .room(crate::cache::room::IN_FLIGHT_BYTES)
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
        let mut tee = cache.tee("kube-proxy", list_target()).unwrap();
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
        let mut tee = cache.tee("kube-proxy", list_target()).unwrap();
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
        let mut tee = cache.tee("kube-proxy", list_target()).unwrap();
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

    fn watch_tee(cache: &Arc<Cache>) -> CacheTee {
        let CacheTarget::List { set, .. } = list_target() else {
            unreachable!()
        };
        cache.tee("kube-proxy", CacheTarget::Watch(set)).unwrap()
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
            .room(crate::cache::room::IN_FLIGHT_BYTES)
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
        let CacheTarget::List { set, .. } = list_target() else {
            unreachable!()
        };
        let later = CacheTarget::List {
            set,
            continue_from: Some("never-seen".into()),
        };
        assert!(cache.tee("kube-proxy", later).is_none());
        cache.close();
    }
}
