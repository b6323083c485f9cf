//! The wait for a state's first list: a client of the multiplexer waits while the feed's
//! list keeps coming (a thin link's minutes), not while it stalled, failed or never began.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Shared;

impl Shared {
    /// Notes that data of the feed's list arrived.
    pub fn note_listing(&self) {
        self.listing.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Notes whether a page of the feed's list is asked for and not yet answered.
    pub fn note_awaiting(&self, awaiting: bool) {
        self.awaiting.store(awaiting, Ordering::Release);
    }

    /// Resolves once the state holds a list, or once `window` passes with no data of its
    /// list arriving and no page of it awaited: a first list that keeps coming (a thin
    /// link's minutes) is waited for, one that stalled, failed or never began is not. Owns
    /// what it waits on.
    pub fn first_list(&self, window: Duration) -> impl Future<Output = ()> + Send + use<> {
        let mut versions = self.versions();
        let mut listing = self.listing.subscribe();
        listing.mark_unchanged();
        let awaiting = self.awaiting.clone();
        async move {
            loop {
                let listed = versions.wait_for(Option::is_some);
                if tokio::time::timeout(window, listed).await.is_ok() {
                    return;
                }
                let came = listing.has_changed().unwrap_or(false);
                if !came && !awaiting.load(Ordering::Acquire) {
                    return;
                }
                listing.mark_unchanged();
            }
        }
    }
}
