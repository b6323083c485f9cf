//! How an informer waits before it lists again after a failure.
//!
//! kube-runtime's default policy (0.8 s doubling to 30 s, with jitter, and reset once two
//! minutes pass without a failure) is the right one, but `StreamBackoff` also resets it on
//! every item the watcher yields, and the watcher yields `Event::Init` before every list. A
//! list that keeps failing (a cluster without OpenYurt's NodePool CRD answers 404 for
//! good) was therefore retried every 0.8–1.6 s for as long as the gateway ran, by every
//! node. Here only the two failure-free minutes reset the policy.

use std::time::Duration;

use kube::runtime::utils::Backoff;
use kube::runtime::watcher::DefaultBackoff;

/// kube-runtime's default backoff, reset only by time without failures.
#[derive(Default)]
pub(crate) struct ListBackoff(DefaultBackoff);

impl Iterator for ListBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.0.next()
    }
}

impl Backoff for ListBackoff {
    fn reset(&mut self) {
        // An item is no sign of health: the watcher yields one before every list.
    }
}

#[cfg(test)]
mod tests {
    use futures_util::{StreamExt, stream};
    use kube::runtime::utils::StreamBackoff;
    use tokio::time::Instant;

    use super::*;

    /// A failing list as the watcher yields it: `Init`, then the failure, over and over.
    #[tokio::test(start_paused = true)]
    async fn a_list_that_keeps_failing_is_retried_ever_later() {
        let attempts = stream::iter(0..6).flat_map(|_| stream::iter([Ok(()), Err(())]));
        let mut retried = std::pin::pin!(StreamBackoff::new(attempts, ListBackoff::default()));
        let mut failures = Vec::new();
        while let Some(item) = retried.next().await {
            if item.is_err() {
                failures.push(Instant::now());
            }
        }
        let gaps: Vec<Duration> = failures.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps.len(), 5);
        // 0.8 s doubling, each with up to its own length again of jitter.
        for (gap, floor) in gaps.iter().zip([0.8, 1.6, 3.2, 6.4, 12.8]) {
            assert!(gap.as_secs_f64() >= floor, "gaps {gaps:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn two_minutes_without_a_failure_start_the_waits_afresh() {
        let mut backoff = ListBackoff::default();
        for _ in 0..5 {
            backoff.next();
        }
        backoff.reset();
        assert!(backoff.next().is_some_and(|d| d >= Duration::from_secs(12)));
        tokio::time::advance(Duration::from_secs(121)).await;
        assert!(
            backoff
                .next()
                .is_some_and(|d| d < Duration::from_millis(1600))
        );
    }
}
