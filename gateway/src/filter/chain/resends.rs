//! The objects a watch sends again to be filtered anew after a lookup change, marked for the
//! watch's filtering: which they are, and the lookup epoch of the earliest change each is
//! sent again for. The filtering holds back one its filters have made the same of since
//! before that change: its client holds it already.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Objects sent again, by key, each with the [`crate::filter::Lookup::epoch`] of the
/// earliest change it is sent again for. Shared by a watch, which marks them as it sends
/// them, and its filtering, which takes the mark of each object it meets.
#[derive(Clone, Debug, Default)]
pub struct Resends(Arc<Mutex<HashMap<Arc<str>, u64>>>);

impl Resends {
    /// Marks the object of `key` as sent again for a change of `epoch`.
    pub fn mark(&self, key: &Arc<str>, epoch: u64) {
        let mut marks = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        marks
            .entry(key.clone())
            .and_modify(|earliest| *earliest = (*earliest).min(epoch))
            .or_insert(epoch);
    }

    /// The mark of the object of `key`, taken: the epoch of the change it is sent again
    /// for, if it is.
    pub(crate) fn take(&self, key: &str) -> Option<u64> {
        let mut marks = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        marks.remove(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_keeps_the_earliest_epoch_and_is_taken_once() {
        let resends = Resends::default();
        let key: Arc<str> = Arc::from("ns/s");
        resends.mark(&key, 9);
        resends.mark(&key, 4);
        resends.mark(&key, 7);
        assert_eq!(resends.take("ns/s"), Some(4));
        assert_eq!(resends.take("ns/s"), None);
        assert_eq!(resends.take("ns/other"), None);
    }
}
