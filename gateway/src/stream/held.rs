//! One copy of an object's bytes for everything in the process that holds it.
//!
//! Each filtered watch stream remembers what its client was last shown of every object that
//! changed while it was open (the visibility rule), and the multiplexer holds every object
//! of its resources. Each needs the bytes in an allocation of their own: an event's object
//! is a slice of the buffer its stream was read into, and held as that slice it would keep
//! the whole buffer alive. A node's clients watch the same objects, and filters keep them
//! or make the same of them for each client, so these copies are mostly the same bytes:
//! held here, identical bytes are one allocation, however many streams hold them.
//!
//! A copy nothing else holds any more is let go by the next sweep, which comes after as
//! many new copies as an eighth of those held, and at least [`SWEEP_AFTER`]: what is held
//! for nobody stays below that share.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex, PoisonError};

use bytes::Bytes;

/// New copies between two sweeps, at least.
const SWEEP_AFTER: usize = 256;

/// The copies, and the new ones since the last sweep.
#[derive(Default)]
struct Copies {
    held: HashSet<Bytes, foldhash::fast::RandomState>,
    since_sweep: usize,
}

impl Copies {
    fn hold(&mut self, bytes: &[u8]) -> Bytes {
        if let Some(copy) = self.held.get(bytes) {
            return copy.clone();
        }
        self.since_sweep += 1;
        if self.since_sweep > (self.held.len() / 8).max(SWEEP_AFTER) {
            // Under the lock, a copy this set alone holds cannot be cloned meanwhile: only
            // `hold` hands copies out.
            self.held.retain(|copy| !copy.is_unique());
            self.since_sweep = 0;
        }
        let copy = Bytes::copy_from_slice(bytes);
        self.held.insert(copy.clone());
        copy
    }
}

static COPIES: LazyLock<Mutex<Copies>> = LazyLock::new(Mutex::default);

/// `bytes` in an allocation of their own, shared with every other holder of the same bytes.
pub fn held(bytes: &[u8]) -> Bytes {
    let mut copies = COPIES.lock().unwrap_or_else(PoisonError::into_inner);
    copies.hold(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_bytes_are_one_allocation_apart_from_the_buffer_they_came_from() {
        let mut copies = Copies::default();
        let buffer = Bytes::from_static(b"[{\"a\":1},{\"a\":1}]");
        let (first, second) = (buffer.slice(1..8), buffer.slice(9..16));
        let (one, other) = (copies.hold(&first), copies.hold(&second));
        assert_eq!(one, first);
        assert_eq!(one.as_ptr(), other.as_ptr(), "one allocation for both");
        assert!(!buffer.as_ptr_range().contains(&one.as_ptr()));
        assert_ne!(copies.hold(b"{\"a\":2}").as_ptr(), one.as_ptr());
    }

    #[test]
    fn copies_nothing_holds_are_let_go_and_held_ones_are_kept() {
        let mut copies = Copies::default();
        let kept = copies.hold(b"kept");
        for n in 0..10 * SWEEP_AFTER {
            drop(copies.hold(format!("gone {n}").as_bytes()));
        }
        assert!(
            copies.held.len() <= SWEEP_AFTER + 2,
            "{} held for nobody",
            copies.held.len()
        );
        assert_eq!(copies.hold(b"kept").as_ptr(), kept.as_ptr());
    }
}
