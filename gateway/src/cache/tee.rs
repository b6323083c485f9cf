//! The tee into the cache: implements the stream's [`Sink`] for one response, sending what
//! the client received to the writer without ever waiting for it.

use std::sync::Arc;

use bytes::Bytes;

use super::key::{ResourceKey, SetKey};
use super::policy::CacheTarget;
use super::writer::{Cache, Op};
use crate::stream::{Event, ListEnd, Sink};

/// What one response feeds.
enum State {
    /// A list page: items are staged under `list`.
    List {
        list: u64,
        set: Arc<SetKey>,
        resource: Arc<ResourceKey>,
        items: u64,
    },
    /// A watch of `set`.
    Watch { set: Arc<SetKey> },
    /// A single object of `resource`.
    Object { resource: Arc<ResourceKey> },
    /// Finished or given up.
    Done,
}

/// The cache tee of one response.
pub struct CacheTee {
    cache: Arc<Cache>,
    state: State,
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
                    set: Arc::new(set),
                    items,
                }
            }
            CacheTarget::Watch(set) => State::Watch { set: Arc::new(set) },
            CacheTarget::Object(resource) => State::Object {
                resource: Arc::new(resource),
            },
        };
        Some(CacheTee { cache, state })
    }

    fn give_up(&mut self, reason: &str) {
        if let State::List { list, set, .. } = &self.state {
            tracing::debug!(set = %set.encode(), reason, "list not cached");
            self.cache.send(Op::Abort { list: *list });
            self.cache.metrics().aborted.inc();
        }
        self.state = State::Done;
    }
}

impl Sink for CacheTee {
    fn list_item(&mut self, object: &Bytes) {
        let State::List {
            list,
            resource,
            items,
            ..
        } = &mut self.state
        else {
            return;
        };
        let Some(room) = self.cache.room(object.len()) else {
            return self.give_up("the cache writer is behind");
        };
        *items += 1;
        let op = Op::Item {
            list: *list,
            resource: resource.clone(),
            // A copy of its own: an item waiting for the writer must not hold the framing
            // buffer it was cut from (and the items around it) beyond the room it took.
            object: Bytes::copy_from_slice(object),
            room,
        };
        if !self.cache.send(op) {
            self.state = State::Done;
        }
    }

    fn list_end(&mut self, end: ListEnd) {
        let State::List {
            list, set, items, ..
        } = std::mem::replace(&mut self.state, State::Done)
        else {
            return;
        };
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

    fn event(&mut self, event: &Event) {
        let State::Watch { set } = &self.state else {
            return;
        };
        // A dropped event is counted (as refused); the set catches up at its next list.
        if let Some(room) = self.cache.room(event.object.len()) {
            self.cache.send(Op::Event {
                set: set.clone(),
                event: event.clone(),
                room,
            });
        }
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

    #[test]
    fn a_list_the_writer_has_no_room_for_is_given_up_not_committed() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(RedbStore::open(dir.path()).unwrap());
        let cache = Cache::start(
            store.clone(),
            CachePolicy::new(&["*"]),
            CacheMetrics::default(),
        );

        let all_room = cache
            .room(crate::cache::writer::IN_FLIGHT_BYTES)
            .expect("the room is free at first");
        let mut tee = cache.tee("kube-proxy", list_target()).unwrap();
        tee.list_item(&Bytes::from_static(OBJECT));
        tee.list_end(end());
        drop(tee);
        cache.flush();
        assert!(
            store.sets("").unwrap().is_empty(),
            "a list that lost an item is not committed"
        );
        assert_eq!(cache.metrics().aborted.get(), 1);
        assert_eq!(cache.metrics().refused.get(), 1);

        drop(all_room);
        let mut tee = cache.tee("kube-proxy", list_target()).unwrap();
        tee.list_item(&Bytes::from_static(OBJECT));
        tee.list_end(end());
        cache.flush();
        assert_eq!(store.sets("").unwrap().len(), 1);
        assert_eq!(cache.metrics().commits.get(), 1);
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
