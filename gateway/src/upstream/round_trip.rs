//! A server's round-trip estimate, as TCP keeps its own (RFC 6298): a smoothed time and its
//! variation, from the probes it answered. The probe and connect timeouts stretch to it on
//! a slow link (a thin one's queue holds seconds) and stay at their configured floor on a
//! fast one, so a cut is found as quickly there as before.

use std::time::Duration;

/// The smoothed round trip and its variation; none until a first sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RoundTrip {
    estimate: Option<(Duration, Duration)>,
}

impl RoundTrip {
    /// Takes one answered exchange's time.
    pub fn observe(&mut self, sample: Duration) {
        self.estimate = Some(match self.estimate {
            None => (sample, sample / 2),
            Some((smoothed, variation)) => {
                let gap = smoothed.abs_diff(sample);
                (smoothed * 7 / 8 + sample / 8, variation * 3 / 4 + gap / 4)
            }
        });
    }

    /// The time to wait for an answer: the smoothed round trip and four times its variation,
    /// within `floor..=cap`.
    pub fn timeout(&self, floor: Duration, cap: Duration) -> Duration {
        let wanted = self
            .estimate
            .map_or(floor, |(smoothed, variation)| smoothed + variation * 4);
        wanted.clamp(floor, cap.max(floor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOOR: Duration = Duration::from_secs(2);
    const CAP: Duration = Duration::from_secs(10);

    #[test]
    fn a_fast_link_keeps_the_floor_and_a_slow_one_stretches_within_the_cap() {
        let mut fast = RoundTrip::default();
        assert_eq!(fast.timeout(FLOOR, CAP), FLOOR, "no sample: the floor");
        for _ in 0..10 {
            fast.observe(Duration::from_millis(20));
        }
        assert_eq!(fast.timeout(FLOOR, CAP), FLOOR);

        let mut slow = RoundTrip::default();
        slow.observe(Duration::from_millis(1500));
        // 1.5 s + 4 × 0.75 s
        assert_eq!(slow.timeout(FLOOR, CAP), Duration::from_millis(4500));
        for _ in 0..5 {
            slow.observe(Duration::from_secs(8));
        }
        assert_eq!(slow.timeout(FLOOR, CAP), CAP);
    }

    #[test]
    fn a_steady_round_trip_narrows_its_variation() {
        let mut steady = RoundTrip::default();
        steady.observe(Duration::from_secs(3));
        let first = steady.timeout(FLOOR, CAP);
        for _ in 0..30 {
            steady.observe(Duration::from_secs(3));
        }
        let later = steady.timeout(FLOOR, CAP);
        assert!(
            later < first,
            "{later:?} after steady samples, {first:?} at first"
        );
        assert!(later >= Duration::from_secs(3));
    }
}
