//! Re-filtering instead of re-listing: when something a filtered watch's filters looked up
//! changes (a Service's topology, the node's pool), the watch is sent again — at the version
//! it was last sent, through its filters, which now read the new value — just the objects
//! whose filtering read what changed. The pipeline's visibility rule turns each into the
//! ADDED, MODIFIED or DELETED the client is to see. A watch resumed from a version older than
//! a lookup change is sent again what that change touched, so no client keeps objects
//! filtered by what no longer holds.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::broadcast;
use tokio::time::{Duration, Instant};

use crate::filter::{LookupChange, LookupUse, Resends, Touched};

/// What a filtered watch re-filters by: the lookup changes it follows, what its filters
/// read, and where it marks what it sends again for them.
pub struct Refilter {
    /// The lookup changes, from when the watch was asked for.
    pub changes: broadcast::Receiver<LookupChange>,
    /// What the watch's filters read, by object.
    pub reads: LookupUse,
    /// The marks of the objects sent again, for the filters to hold back those they make
    /// the same of.
    pub resends: Resends,
}

/// The lookup changes of the recent window, each with the state's version when it came: a
/// watch resumed from a version re-filters what the changes since touched. `None` is a
/// change that was missed, which may have touched anything.
#[derive(Default)]
pub(super) struct LookupLog {
    entries: VecDeque<(Instant, u64, Option<LookupChange>)>,
    /// The newest version of a change no longer held: a resume from it or older re-filters
    /// everything.
    lost: Option<u64>,
}

impl LookupLog {
    /// Notes `change`, which came at the state's `version`, keeping the changes of the
    /// last `window`, `most` of them at most (the state's window of changes).
    pub(super) fn note(
        &mut self,
        (now, version): (Instant, u64),
        change: Option<LookupChange>,
        (window, most): (Duration, usize),
    ) {
        while let Some((at, oldest, _)) = self.entries.front() {
            if self.entries.len() < most && now.duration_since(*at) < window {
                break;
            }
            self.lost = Some(*oldest);
            self.entries.pop_front();
        }
        self.entries.push_back((now, version, change));
    }

    /// The changes a client at `since` may not have been filtered with (those that came at
    /// `since` or later); `None` when some of them are no longer held.
    pub(super) fn since(&self, since: u64) -> Option<Vec<Option<LookupChange>>> {
        if self.lost.is_some_and(|lost| lost >= since) {
            return None;
        }
        Some(
            self.entries
                .iter()
                .filter(|(_, version, _)| *version >= since)
                .map(|(_, _, change)| change.clone())
                .collect(),
        )
    }
}

/// Objects to send again, in the order their changes came, each once, with the lookup
/// epoch of the earliest change it is sent again for (0 for a missed change: any epoch).
#[derive(Default)]
pub(super) struct Pending {
    order: VecDeque<Arc<str>>,
    queued: HashMap<Arc<str>, u64>,
}

impl Pending {
    /// Queues the objects `touched` names for a change of `epoch`; `all` lists every
    /// object, for [`Touched::All`].
    pub(super) fn queue(
        &mut self,
        touched: Touched,
        epoch: u64,
        all: impl FnOnce() -> Vec<Arc<str>>,
    ) {
        let keys = match touched {
            Touched::Nothing => return,
            Touched::Objects(keys) => keys.into_iter().collect(),
            Touched::All => all(),
        };
        for key in keys {
            match self.queued.entry(key) {
                Entry::Occupied(mut queued) => {
                    let earliest = queued.get_mut();
                    *earliest = (*earliest).min(epoch);
                }
                Entry::Vacant(vacant) => {
                    self.order.push_back(vacant.key().clone());
                    vacant.insert(epoch);
                }
            }
        }
    }

    /// The next object to send again, and the epoch it is sent again for.
    pub(super) fn next(&mut self) -> Option<(Arc<str>, u64)> {
        let key = self.order.pop_front()?;
        let epoch = self.queued.remove(&key).unwrap_or_default();
        Some((key, epoch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(key: &str) -> Option<LookupChange> {
        Some(LookupChange {
            feed: 0,
            key: Some(Arc::from(key)),
            epoch: 1,
        })
    }

    #[test]
    fn a_resume_gets_the_changes_from_its_version_on_until_some_are_lost() {
        let start = Instant::now();
        let window = (Duration::from_secs(180), 100);
        let mut log = LookupLog::default();
        log.note((start, 10), change("ns/a"), window);
        log.note((start, 12), change("ns/b"), window);
        assert_eq!(log.since(11), Some(vec![change("ns/b")]));
        assert_eq!(
            log.since(10),
            Some(vec![change("ns/a"), change("ns/b")]),
            "a change at the client's version may have come after its view"
        );
        log.note((start + window.0, 15), None, window);
        assert_eq!(log.since(13), Some(vec![None]));
        assert_eq!(
            log.since(12),
            None,
            "ns/b's change aged out: anything may differ"
        );
    }

    #[test]
    fn pending_objects_are_queued_once_in_order_with_their_earliest_epoch() {
        let mut pending = Pending::default();
        let keys = |keys: &[&str]| keys.iter().map(|k| Arc::from(*k)).collect::<Vec<_>>();
        pending.queue(
            Touched::Objects(keys(&["a"]).into_iter().collect()),
            5,
            Vec::new,
        );
        pending.queue(Touched::All, 8, || keys(&["b", "a", "c"]));
        pending.queue(Touched::Nothing, 1, || unreachable!("nothing to list"));
        let mut sent = Vec::new();
        while let Some((key, epoch)) = pending.next() {
            sent.push((key.to_string(), epoch));
        }
        let sent: Vec<(&str, u64)> = sent.iter().map(|(k, e)| (k.as_str(), *e)).collect();
        assert_eq!(sent, [("a", 5), ("b", 8), ("c", 8)]);
    }
}
