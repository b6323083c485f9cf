//! When an open watch must end: the cloud goes away, the gateway stops, the filters that
//! apply to it change, or what its filters looked up changes.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use crate::filter::{Filters, LookupUse};
use crate::node::informer::Informers;
use crate::request::RequestContext;
use crate::stream::{Stop, StopSignal};
use crate::upstream::HealthWatch;

/// Open watches whose filter chain changed end at a random moment within this window, so a
/// node's clients do not all re-list at once; they send nothing meanwhile (it would be
/// filtered by the chain that no longer applies).
const RELIST_JITTER: Duration = Duration::from_secs(1);
/// Watches whose filters' lookups changed are spread wider: such changes are not urgent, and
/// every node of the cluster sees them at the same moment.
const LOOKUP_RELIST_JITTER: Duration = Duration::from_secs(5);

/// What ends open watches: the services a watch's stop signal listens to.
#[derive(Clone)]
pub struct WatchEnds {
    /// "Some apiserver is healthy", and its changes.
    pub health: HealthWatch,
    /// Turns true when the gateway is stopping.
    pub stopping: watch::Receiver<bool>,
    /// The filter generations.
    pub filters: Arc<Filters>,
    /// The objects filters look up, when filters are configured.
    pub informers: Option<Arc<Informers>>,
}

impl WatchEnds {
    /// Resolves when the open watch `context` must end: the cloud became unreachable (the
    /// client re-lists once it is back; not for a watch `served` from the gateway's shared
    /// state, which outlives the cloud), the filters that apply to it (`fingerprint`)
    /// changed or — for a filtered watch — an object its filters have looked up (`lookups`)
    /// changed (both at once: it sends nothing more, and ends after a jitter), or the
    /// gateway is stopping.
    pub fn signal(
        &self,
        context: &RequestContext,
        fingerprint: u64,
        lookups: Option<LookupUse>,
        served: bool,
    ) -> StopSignal {
        let (info, component) = (context.info.clone(), context.component.clone());
        // An object its filters read changed: the watch is filtered anew after a re-list.
        let feeds = self
            .informers
            .as_ref()
            .zip(lookups)
            .map(|(informers, lookups)| (informers.changes(), lookups));
        let mut health = self.health.clone();
        let mut stopping = self.stopping.clone();
        let filters = self.filters.clone();
        let mut generations = filters.subscribe();
        Box::pin(async move {
            let lost = async {
                if served {
                    std::future::pending::<()>().await;
                }
                let _ = health.wait_for(|healthy| !*healthy).await;
            };
            let stop = stopping.wait_for(|stopping| *stopping);
            let changed = async {
                loop {
                    if generations.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                    if filters.current().fingerprint(&info, &component) != fingerprint {
                        tracing::debug!(%component, resource = %info.resource, "the filter chain changed: ending the watch");
                        return;
                    }
                }
            };
            let looked_up = async {
                let Some((mut changes, lookups)) = feeds else {
                    return std::future::pending::<()>().await;
                };
                loop {
                    let touched = match changes.recv().await {
                        Ok(change) => lookups.reads(&change),
                        // Changes were missed: any of them may have been read.
                        Err(broadcast::error::RecvError::Lagged(_)) => lookups.reads_anything(),
                        Err(broadcast::error::RecvError::Closed) => {
                            return std::future::pending::<()>().await;
                        }
                    };
                    if touched {
                        break;
                    }
                }
                tracing::debug!(%component, resource = %info.resource, "what its filters looked up changed: ending the watch");
            };
            tokio::select! {
                () = lost => Stop::End,
                _ = stop => Stop::End,
                () = changed => Stop::Stale {
                    message: "the gateway's filters for this watch changed: re-list".into(),
                    after: jitter(RELIST_JITTER),
                },
                () = looked_up => Stop::Stale {
                    message: "what this watch's filters look up changed: re-list".into(),
                    after: jitter(LOOKUP_RELIST_JITTER),
                },
            }
        })
    }
}

/// A random delay within `window`.
fn jitter(window: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    let millis = u64::try_from(window.as_millis()).unwrap_or(1000).max(1);
    Duration::from_millis(random % millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_its_window() {
        assert!((0..100).all(|_| jitter(RELIST_JITTER) < RELIST_JITTER));
    }
}
