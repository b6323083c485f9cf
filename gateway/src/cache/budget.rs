//! The in-flight budget the writer gives the tees: how many object bytes may wait for it at
//! once, and how a set's first list waits for room instead of going uncached. A tee takes
//! room before it sends an object; the writer frees it once the object is applied.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes of objects on their way to the store from re-lists, watch events and single
/// objects. A tee that finds no room gives up on its response (the client is not held up,
/// and the store still holds what it held); the bound keeps a slow disk from costing memory.
pub(crate) const IN_FLIGHT_BYTES: usize = 4 << 20;
/// Bytes of objects on their way to the store from lists of sets the store does not hold
/// yet. Such a list waits for this room rather than be given up: offline answers need it.
pub(crate) const FIRST_LIST_BYTES: usize = 1 << 20;
/// Longest a first list waits for room at one time before it is given up after all (a
/// writer this far behind is stuck, and the client must not be held by it).
pub(crate) const FIRST_LIST_WAIT: Duration = Duration::from_secs(10);

/// Room for one object on its way to the writer, or `None` when the wait was given up.
pub(crate) type BudgetWait = Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send>>;

/// The two bounds on object bytes in flight to the writer; clones share them.
#[derive(Clone)]
pub(crate) struct Budget {
    shared: Arc<Semaphore>,
    first_lists: Arc<Semaphore>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            shared: Arc::new(Semaphore::new(IN_FLIGHT_BYTES)),
            first_lists: Arc::new(Semaphore::new(FIRST_LIST_BYTES)),
        }
    }
}

impl Budget {
    /// Room for `bytes` of a re-list, a watch event or an object, if there is some now.
    pub(crate) fn try_shared(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let permits = u32::try_from(bytes.max(1)).ok()?;
        self.shared.clone().try_acquire_many_owned(permits).ok()
    }

    /// Room for `bytes` of a first list, if there is some now.
    pub(crate) fn try_first_list(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        self.first_lists
            .clone()
            .try_acquire_many_owned(first_list_permits(bytes))
            .ok()
    }

    /// Room for `bytes` of a first list once the writer has made it, or `None` after
    /// [`FIRST_LIST_WAIT`].
    pub(crate) fn wait_first_list(&self, bytes: usize) -> BudgetWait {
        let room = self.first_lists.clone();
        let permits = first_list_permits(bytes);
        Box::pin(async move {
            tokio::time::timeout(FIRST_LIST_WAIT, room.acquire_many_owned(permits))
                .await
                .ok()?
                .ok()
        })
    }
}

/// Permits an object of `bytes` takes of the first lists' room: an object larger than the
/// whole room takes all of it (so it waits for the queue to empty, then goes alone).
fn first_list_permits(bytes: usize) -> u32 {
    let permits = bytes.clamp(1, FIRST_LIST_BYTES);
    u32::try_from(permits).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_first_list_waits_for_room_that_the_writer_frees() {
        let room = Budget::default();
        let all = room
            .try_first_list(FIRST_LIST_BYTES)
            .expect("free at first");
        assert!(room.try_first_list(1).is_none());
        let wait = room.wait_first_list(100);
        let waiter = tokio::spawn(wait);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "no room yet");
        drop(all);
        let permit = waiter.await.unwrap().expect("room once freed");
        assert_eq!(permit.num_permits(), 100);
    }

    #[tokio::test]
    async fn an_object_larger_than_the_room_takes_all_of_it() {
        let room = Budget::default();
        let permit = room
            .wait_first_list(FIRST_LIST_BYTES * 3)
            .await
            .expect("the whole room is free");
        assert_eq!(permit.num_permits(), FIRST_LIST_BYTES);
        assert!(room.try_first_list(1).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_on_a_stuck_writer_is_given_up() {
        let room = Budget::default();
        let _all = room
            .try_first_list(FIRST_LIST_BYTES)
            .expect("free at first");
        assert!(room.wait_first_list(1).await.is_none());
    }

    #[test]
    fn the_first_lists_room_is_apart_from_the_shared_room() {
        let room = Budget::default();
        let _shared = room.try_shared(IN_FLIGHT_BYTES).expect("free at first");
        assert!(room.try_shared(1).is_none());
        assert!(room.try_first_list(FIRST_LIST_BYTES).is_some());
    }
}
