//! Paginated lists waiting for their next page: a page that ends with a `continue` token
//! parks its list here, and the request that brings the token back takes it up again. The
//! writer owns this; a list tee parks its list at its end.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A later page of a paginated list must arrive within this time (kube-apiserver's continue
/// tokens expire after about five minutes).
const PAGE_TIMEOUT: Duration = Duration::from_secs(300);

/// A paginated list waiting for its next page.
struct Parked {
    list: u64,
    items: u64,
    since: Instant,
}

/// The lists waiting for their next page, by the `continue` token that asks for it.
#[derive(Default)]
pub(crate) struct PendingPages {
    parked: Mutex<HashMap<String, Parked>>,
}

impl PendingPages {
    /// Parks list `list`, with `items` so far, until a request with `continue=token`;
    /// returns the lists that waited too long, to abort.
    pub(crate) fn park(&self, token: String, list: u64, items: u64) -> Vec<u64> {
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        let expired: Vec<String> = parked
            .iter()
            .filter(|(_, p)| p.since.elapsed() > PAGE_TIMEOUT)
            .map(|(t, _)| t.clone())
            .collect();
        let expired = expired
            .iter()
            .filter_map(|token| parked.remove(token))
            .map(|stale| stale.list)
            .collect();
        parked.insert(
            token,
            Parked {
                list,
                items,
                since: Instant::now(),
            },
        );
        expired
    }

    /// The list a request with `continue=token` continues, and its item count so far.
    pub(crate) fn resume(&self, token: &str) -> Option<(u64, u64)> {
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        parked.remove(token).map(|p| (p.list, p.items))
    }
}
