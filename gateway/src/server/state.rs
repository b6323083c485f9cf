//! What every request is served with: the services the listeners share.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::caller::KnownCredentials;
use super::limit::InFlightLimit;
use super::watch_end::WatchEnds;
use crate::cache::Cache;
use crate::filter::Filters;
use crate::informer::Informers;
use crate::local::Local;
use crate::metrics::Metrics;
use crate::upstream::{Balancer, HealthWatch, Transport};

/// What every request is served with.
pub(crate) struct State {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) balancer: Arc<Balancer>,
    pub(crate) transport: Transport,
    /// "Some apiserver is healthy", and its changes.
    pub(crate) health: HealthWatch,
    pub(crate) cache: Arc<Cache>,
    pub(crate) filters: Arc<Filters>,
    /// The objects filters look up, when filters are configured.
    pub(crate) informers: Option<Arc<Informers>>,
    pub(crate) local: Local,
    /// Turns true when the gateway is stopping: open watches end.
    pub(crate) stopping: watch::Receiver<bool>,
    /// An upstream answer later than this (the heartbeat's timeout) has the health checker
    /// probe that server at once.
    pub(crate) late_answer: Duration,
    /// `--max-requests-in-flight`.
    pub(crate) in_flight: InFlightLimit,
    /// The HTTPS proxy's callers' credentials the apiserver accepted.
    pub(crate) known: KnownCredentials,
    /// The certificate manager's renewals (`/v1/token` updates the client one's token).
    pub(crate) certificates: Vec<Arc<crate::certificate::Renewal>>,
}

impl State {
    /// What ends open watches, for one watch's stop signal.
    pub(crate) fn watch_ends(&self) -> WatchEnds {
        WatchEnds {
            health: self.health.clone(),
            stopping: self.stopping.clone(),
            filters: self.filters.clone(),
            informers: self.informers.clone(),
        }
    }
}
