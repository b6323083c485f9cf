//! What every request is served with: the services the listeners share.

use std::sync::Arc;
use std::time::Duration;

use super::caller::KnownCredentials;
use super::limit::InFlightLimit;
use super::watch_end::WatchEnds;
use crate::cache::Cache;
use crate::filter::Filters;
use crate::local::Local;
use crate::metrics::Metrics;
use crate::node::informer::Informers;
use crate::node::multiplexer::Multiplexer;
use crate::node::pool::Pool;
use crate::upstream::{Balancer, Transport};

/// What every request is served with.
pub(crate) struct State {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) balancer: Arc<Balancer>,
    pub(crate) transport: Transport,
    pub(crate) cache: Arc<Cache>,
    pub(crate) filters: Arc<Filters>,
    /// The objects filters look up, when filters are configured.
    pub(crate) informers: Option<Arc<Informers>>,
    /// The shared states of the pool-scope resources, if any are.
    pub(crate) multiplexer: Option<Arc<Multiplexer>>,
    /// This node's pool and the leaders the multiplexer's feeds follow.
    pub(crate) pool: Pool,
    pub(crate) local: Local,
    /// An upstream answer later than this (the heartbeat's timeout) has the health checker
    /// probe that server at once.
    pub(crate) late_answer: Duration,
    /// `--max-requests-in-flight`.
    pub(crate) in_flight: InFlightLimit,
    /// The HTTPS proxy's callers' credentials the apiserver accepted.
    pub(crate) known: KnownCredentials,
    /// The certificate manager's renewals (`/v1/token` updates the client one's token).
    pub(crate) certificates: Vec<Arc<crate::certificate::Renewal>>,
    /// What ends open watches (health, stopping, filters, informers), made once.
    pub(crate) watch_ends: WatchEnds,
    /// Where a list written in protobuf is spooled: the cache's directory.
    pub(crate) spool_dir: std::path::PathBuf,
}
