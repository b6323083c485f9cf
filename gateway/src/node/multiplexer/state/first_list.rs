//! The wait for a state's first list: a client of the multiplexer waits while the feed's
//! list is under way and keeps coming (a thin link's minutes), not while it stalled, failed
//! or never began.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Shared, Waited};

/// How long a list under way may go without data, and without a page of it awaited, before
/// its waiting clients take it for stalled. On a lossy thin link a connection's data can
/// pause for several retransmission timeouts, each at least a second and doubling; the
/// gateway's request timeout bounds the wait for a page's answer to begin.
pub const STALLED: Duration = Duration::from_secs(30);

impl Shared {
    /// Notes that data of the feed's list arrived.
    pub fn note_listing(&self) {
        self.listing.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Notes whether the feed is listing: from before its first list until that list is in
    /// or failed (through the pause after a failure that may mend), and again whenever it
    /// lists.
    pub fn note_underway(&self, underway: bool) {
        self.underway.store(underway, Ordering::Release);
    }

    /// Notes whether a page of the feed's list is asked for and not yet answered.
    pub fn note_awaiting(&self, awaiting: bool) {
        self.awaiting.store(awaiting, Ordering::Release);
    }

    /// Resolves once the state holds a list; or once `window` passes with no data of its
    /// list arriving, no page of it awaited and no list under way (it failed or never
    /// began); or once a list under way goes [`STALLED`] without either. A first list that
    /// keeps coming (a thin link's minutes) is waited for. Says which; owns what it waits on.
    pub fn first_list(&self, window: Duration) -> impl Future<Output = Waited> + Send + use<> {
        let mut versions = self.versions();
        let mut listing = self.listing.subscribe();
        listing.mark_unchanged();
        let (awaiting, underway) = (self.awaiting.clone(), self.underway.clone());
        async move {
            let mut quiet = Duration::ZERO;
            loop {
                let listed = versions.wait_for(Option::is_some);
                if tokio::time::timeout(window, listed).await.is_ok() {
                    return Waited::Listed;
                }
                let came = listing.has_changed().unwrap_or(false);
                listing.mark_unchanged();
                if came || awaiting.load(Ordering::Acquire) {
                    quiet = Duration::ZERO;
                    continue;
                }
                quiet += window;
                if !underway.load(Ordering::Acquire) {
                    return Waited::NoneUnderway;
                }
                if quiet >= STALLED {
                    return Waited::Stalled;
                }
            }
        }
    }
}
