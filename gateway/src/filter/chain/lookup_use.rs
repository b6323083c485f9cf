//! Which of the gateway's change feeds (the kinds its informers keep) a filter's lookups have
//! read. A watch is re-listed when a feed its filters read changes, and left alone when only
//! feeds they never read did: a filter that looks nothing up never ends a watch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The feeds one filter has read so far, as a bit mask (bit `i` = feed `i` of
/// [`Lookup::feed`](crate::filter::lookup::Lookup::feed)), shared by all its instances.
#[derive(Clone, Debug, Default)]
pub(crate) struct FeedsRead(Arc<AtomicU64>);

impl FeedsRead {
    /// Records that a call read `feeds` (a mask).
    pub(crate) fn record(&self, feeds: u64) {
        if feeds != 0 {
            self.0.fetch_or(feeds, Ordering::Relaxed);
        }
    }

    fn mask(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The feeds the filters of one response read, read when a feed changes.
#[derive(Clone, Debug, Default)]
pub struct LookupUse(Vec<FeedsRead>);

impl LookupUse {
    /// The use of the filters whose feeds read are `filters`.
    pub(crate) fn new(filters: Vec<FeedsRead>) -> LookupUse {
        LookupUse(filters)
    }

    /// Whether any of the response's filters has read one of the `changed` feeds (a mask).
    pub fn reads_any(&self, changed: u64) -> bool {
        self.0.iter().any(|filter| filter.mask() & changed != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_follows_the_feeds_its_filters_read() {
        let (reader, bystander) = (FeedsRead::default(), FeedsRead::default());
        let response = LookupUse::new(vec![reader.clone(), bystander]);
        assert!(!response.reads_any(u64::MAX), "nothing read yet");
        reader.record(0b001);
        reader.record(0);
        assert!(response.reads_any(0b011));
        assert!(!response.reads_any(0b110));
    }
}
