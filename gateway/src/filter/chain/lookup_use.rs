//! What a filter's lookups have read — whole change feeds (a `list`) and single objects (a
//! `get`) — so that a watch ends when something its filters read changes, and is left alone
//! when only objects they never read did: a filter that looks nothing up never ends a
//! watch, and a change to another pool's NodePool does not end this node's watches.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use crate::filter::lookup::{CallReads, LookupChange};

/// What one filter has read so far, over all its instances and responses.
#[derive(Clone, Debug, Default)]
pub(crate) struct LookupsRead(Arc<Mutex<Reads>>);

#[derive(Debug, Default)]
struct Reads {
    /// Feeds read whole, bit `i` = feed `i`.
    feeds: u64,
    /// Objects read, by feed.
    keys: HashMap<u32, HashSet<Box<str>>>,
}

impl LookupsRead {
    /// Records what a call read.
    pub(crate) fn record(&self, call: &CallReads) {
        if call.feeds == 0 && call.keys.is_empty() {
            return;
        }
        let mut reads = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        reads.feeds |= call.feeds;
        for (feed, key) in &call.keys {
            let keys = reads.keys.entry(*feed).or_default();
            if !keys.contains(key.as_str()) {
                keys.insert(key.as_str().into());
            }
        }
    }

    /// Whether `change` touches something read.
    fn reads(&self, change: &LookupChange) -> bool {
        let reads = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if change.feed < 64 && reads.feeds & (1 << change.feed) != 0 {
            return true;
        }
        let Some(keys) = reads.keys.get(&change.feed) else {
            return false;
        };
        match &change.key {
            Some(key) => keys.contains(&**key),
            None => !keys.is_empty(),
        }
    }

    /// Whether anything was read at all.
    fn read_any(&self) -> bool {
        let reads = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        reads.feeds != 0 || reads.keys.values().any(|keys| !keys.is_empty())
    }
}

/// What the filters of one response read, asked when a lookup changes.
#[derive(Clone, Debug, Default)]
pub struct LookupUse(Vec<LookupsRead>);

impl LookupUse {
    /// The use of the filters whose reads are `filters`.
    pub(crate) fn new(filters: Vec<LookupsRead>) -> LookupUse {
        LookupUse(filters)
    }

    /// Whether any of the response's filters has read what `change` touches.
    pub fn reads(&self, change: &LookupChange) -> bool {
        self.0.iter().any(|filter| filter.reads(change))
    }

    /// Whether any of them has read anything (what a missed change may have touched).
    pub fn reads_anything(&self) -> bool {
        self.0.iter().any(LookupsRead::read_any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(feed: u32, key: Option<&str>) -> LookupChange {
        LookupChange {
            feed,
            key: key.map(Arc::from),
        }
    }

    #[test]
    fn a_response_follows_what_its_filters_read() {
        let (reader, bystander) = (LookupsRead::default(), LookupsRead::default());
        let response = LookupUse::new(vec![reader.clone(), bystander]);
        assert!(!response.reads_anything(), "nothing read yet");
        assert!(!response.reads(&change(0, None)));

        // A get of one Service (feed 0), twice.
        for _ in 0..2 {
            reader.record(&CallReads {
                feeds: 0,
                keys: vec![(0, "default/web".to_owned())],
            });
        }
        assert!(response.reads_anything());
        assert!(response.reads(&change(0, Some("default/web"))));
        assert!(
            !response.reads(&change(0, Some("default/db"))),
            "another Service"
        );
        assert!(
            response.reads(&change(0, None)),
            "any Service may have changed"
        );
        assert!(
            !response.reads(&change(2, Some("default/web"))),
            "another feed"
        );

        // A list of Nodes (feed 1): any Node.
        reader.record(&CallReads {
            feeds: 0b010,
            keys: Vec::new(),
        });
        assert!(response.reads(&change(1, Some("/edge-2"))));
        assert!(!response.reads(&change(2, None)));
    }
}
