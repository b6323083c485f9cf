//! The tee of a list response (one page): stages its items under its list, parks the list
//! at a page that has a next one, and commits it at the last. It never waits for the writer,
//! but for a set's first list: that one is paced to the writer between upstream reads rather
//! than given up, since without it the cache has nothing to answer for the set when the
//! cloud is away.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::sync::OwnedSemaphorePermit;

use super::link::TeeLink;
use crate::cache::budget::BudgetWait;
use crate::cache::key::{ResourceKey, SetKey};
use crate::cache::message::Message;
use crate::cache::pages::PendingPages;
use crate::stream::{ListEnd, ListSink, Sink};

/// The tee of one list response.
pub struct ListTee {
    link: TeeLink,
    pages: Arc<PendingPages>,
    /// `None` once the page ended or the list was given up.
    open: Option<OpenList>,
}

/// A list page being received.
struct OpenList {
    /// The list its items are staged under (its first page's).
    list: u64,
    set: Arc<SetKey>,
    resource: Arc<ResourceKey>,
    /// Items of the list so far, over all its pages.
    items: u64,
    /// Set when the store does not hold `set` yet: the list waits for room.
    pacing: Option<Pacing>,
}

/// A first list keeping pace with the writer: the items the client was sent that wait for
/// room, in order, and the wait for the first of them.
#[derive(Default)]
struct Pacing {
    waiting: VecDeque<Bytes>,
    wait: Option<BudgetWait>,
}

impl ListTee {
    /// A tee for a page of list `list` of `set`, which has `items` so far; `paced` when the
    /// store does not hold the set yet.
    pub(crate) fn new(
        link: TeeLink,
        pages: Arc<PendingPages>,
        list: u64,
        items: u64,
        set: SetKey,
        paced: bool,
    ) -> ListTee {
        ListTee {
            link,
            pages,
            open: Some(OpenList {
                list,
                resource: Arc::new(set.resource.clone()),
                set: Arc::new(set),
                items,
                pacing: paced.then(Pacing::default),
            }),
        }
    }

    fn give_up(&mut self, reason: &str) {
        if let Some(open) = self.open.take() {
            abort(&self.link, open.list, &open.set, reason);
        }
    }
}

/// Tells the writer to drop list `list` of `set`, staged items and all.
fn abort(link: &TeeLink, list: u64, set: &SetKey, reason: &str) {
    tracing::debug!(set = %set.encode(), reason, "list not cached");
    link.send(Message::Abort { list });
    link.metrics().aborted.inc();
}

/// Hands one item of list `list` to the writer; false when the writer is gone.
fn send_item(
    link: &TeeLink,
    list: u64,
    resource: &Arc<ResourceKey>,
    object: Bytes,
    room: OwnedSemaphorePermit,
) -> bool {
    link.send(Message::Item {
        list,
        resource: resource.clone(),
        object,
        room,
    })
}

impl Sink for ListTee {
    fn abort(&mut self, reason: &str) {
        self.give_up(reason);
    }
}

impl ListSink for ListTee {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(OpenList {
            list,
            resource,
            pacing: Some(pacing),
            ..
        }) = &mut self.open
        else {
            return Poll::Ready(());
        };
        while let Some(bytes) = pacing.waiting.front().map(Bytes::len) {
            let wait = pacing
                .wait
                .get_or_insert_with(|| self.link.wait_first_list_room(bytes));
            let Poll::Ready(room) = wait.as_mut().poll(cx) else {
                return Poll::Pending;
            };
            pacing.wait = None;
            let (Some(room), Some(object)) = (room, pacing.waiting.pop_front()) else {
                self.give_up("the cache writer made no room in time");
                return Poll::Ready(());
            };
            if !send_item(&self.link, *list, resource, object, room) {
                self.open = None;
                break;
            }
        }
        Poll::Ready(())
    }

    fn list_item(&mut self, object: &Bytes) {
        let Some(OpenList {
            list,
            resource,
            items,
            pacing,
            ..
        }) = &mut self.open
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
                    .then(|| self.link.first_list_room(object.len()))
                    .flatten();
                let Some(room) = room else {
                    *items += 1;
                    pacing.waiting.push_back(Bytes::copy_from_slice(object));
                    return;
                };
                room
            }
            None => match self.link.room(object.len()) {
                Some(room) => room,
                None => return self.give_up("the cache writer is behind"),
            },
        };
        *items += 1;
        let object = Bytes::copy_from_slice(object);
        if !send_item(&self.link, *list, resource, object, room) {
            self.open = None;
        }
    }

    fn list_end(&mut self, end: ListEnd) {
        let Some(OpenList {
            list,
            set,
            items,
            pacing,
            ..
        }) = self.open.take()
        else {
            return;
        };
        if pacing.is_some_and(|pacing| !pacing.waiting.is_empty()) {
            // The pipeline waits for room before every read, so this is a sink misused.
            return abort(
                &self.link,
                list,
                &set,
                "the list ended with items not handed over",
            );
        }
        if end.continue_token.is_empty() {
            self.link.send(Message::Commit {
                list,
                set,
                end,
                items,
            });
        } else {
            // More pages follow: the list commits when the last one has arrived.
            for stale in self.pages.park(end.continue_token, list, items) {
                self.link.send(Message::Abort { list: stale });
                self.link.metrics().aborted.inc();
            }
        }
    }
}

impl Drop for ListTee {
    fn drop(&mut self) {
        // A list that never reached its end (the client went away) is not committed.
        self.give_up("the response ended early");
    }
}
