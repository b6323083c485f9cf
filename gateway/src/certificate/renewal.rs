//! When the client certificate is renewed, as client-go's certificate manager decides it: at
//! a random point between 70 % and 90 % of its lifetime, so that a fleet of nodes issued at
//! once does not renew at once. Pure functions of the certificate and a clock.

use std::time::{Duration, SystemTime};

/// A certificate's validity period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// notBefore.
    pub not_before: SystemTime,
    /// notAfter.
    pub not_after: SystemTime,
}

impl Validity {
    /// Whether the certificate may be presented at `now`.
    pub fn valid_at(&self, now: SystemTime) -> bool {
        self.not_before <= now && now < self.not_after
    }
}

/// When to renew: `not_before + lifetime × (0.7 + 0.2 × jitter)`, `jitter` in `[0, 1)`.
pub fn renewal_deadline(validity: Validity, jitter: f64) -> SystemTime {
    let lifetime = validity
        .not_after
        .duration_since(validity.not_before)
        .unwrap_or(Duration::ZERO);
    let fraction = 0.7 + 0.2 * jitter.clamp(0.0, 1.0);
    validity.not_before + lifetime.mul_f64(fraction)
}

/// How long to wait at `now` for `deadline` (none once it passed).
pub fn wait_until(now: SystemTime, deadline: SystemTime) -> Duration {
    deadline.duration_since(now).unwrap_or(Duration::ZERO)
}

/// The wait before retry number `attempt` (0-based) of a failed renewal: doubling from 1 s,
/// at most 5 minutes.
pub fn retry_after(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.min(9)).min(Duration::from_secs(300))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn renewal_falls_between_70_and_90_percent_of_the_lifetime() {
        let validity = Validity {
            not_before: at(1000),
            not_after: at(2000),
        };
        assert_eq!(renewal_deadline(validity, 0.0), at(1700));
        assert_eq!(renewal_deadline(validity, 0.5), at(1800));
        for _ in 0..1000 {
            let deadline = renewal_deadline(validity, fastrand::f64());
            assert!(at(1700) <= deadline && deadline < at(1900), "{deadline:?}");
        }
        // Out-of-range jitter is clamped.
        assert_eq!(renewal_deadline(validity, 7.0), at(1900));
    }

    #[test]
    fn a_deadline_passed_means_renew_now() {
        assert_eq!(wait_until(at(10), at(25)), Duration::from_secs(15));
        assert_eq!(wait_until(at(30), at(25)), Duration::ZERO);
        let validity = Validity {
            not_before: at(100),
            not_after: at(200),
        };
        assert!(validity.valid_at(at(100)) && validity.valid_at(at(199)));
        assert!(!validity.valid_at(at(200)) && !validity.valid_at(at(99)));
    }

    #[test]
    fn retries_back_off_to_five_minutes() {
        let waits: Vec<u64> = (0..12).map(|n| retry_after(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
    }
}
