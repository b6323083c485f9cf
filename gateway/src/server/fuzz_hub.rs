//! The hub server with nothing behind it, for the `hub` fuzz target (`fuzz/`): an empty
//! filter chain, one unreachable apiserver, and an in-memory cache holding one Secret and
//! one ConfigMap, so `/v1/cache/object` has something to show and to redact.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use tokio::sync::watch;

use super::caller::KnownCredentials;
use super::limit::InFlightLimit;
use super::state::State;
use super::watch_end::WatchEnds;
use crate::cache::{
    Cache, CacheMetrics, CachePolicy, RedbStore, ResourceKey, SetKey, SetMeta, StoreWriter, WriteOp,
};
use crate::error::BoxError;
use crate::filter::{FilterSettings, Filters, Limits, NoLookup};
use crate::local::Local;
use crate::metrics::Metrics;
use crate::reply::ResponseBody;
use crate::upstream::{Balancer, Credentials, KubeletLease, LbMode, Transport};

/// The value of the cached Secret's `data.token`, which no hub answer may show.
pub const SECRET_VALUE: &str = "c2VjcmV0LXRva2Vu";

/// A hub server over an empty gateway.
pub struct HubFixture {
    state: Arc<State>,
    /// Keeps the offline watches' signals open.
    _signals: (watch::Sender<bool>, watch::Sender<bool>),
}

impl HubFixture {
    /// Starts it; `scratch` is a directory for the filter host's compiled code (none is
    /// compiled: the chain is empty).
    pub async fn start(scratch: &std::path::Path) -> Result<HubFixture, BoxError> {
        let mut metrics = Metrics::new();
        let store = Arc::new(RedbStore::in_memory()?);
        cache_objects(store.as_ref())?;
        let cache = Cache::start(
            store,
            CachePolicy::new(&["kubelet"]),
            CacheMetrics::default(),
        );
        let settings = FilterSettings {
            dir: None,
            config_file: None,
            compiled_cache_dir: scratch.to_owned(),
            helper: None,
            after_load: None,
            node_name: "edge-1".into(),
            node_pool: None,
            limits: Limits::default(),
            debounce: crate::filter::DEFAULT_DEBOUNCE,
            disabled: Vec::new(),
        };
        let filters = Arc::new(Filters::start(settings, Arc::new(NoLookup), &mut metrics).await?);
        let (health_tx, health) = watch::channel(false);
        let (stopping_tx, stopping) = watch::channel(false);
        let state = State {
            metrics: Arc::new(metrics),
            balancer: Arc::new(Balancer::new(
                vec![Uri::from_static("https://198.18.0.1:6443")],
                LbMode::Rr,
            )),
            transport: Transport::new(Credentials::anonymous()?, Duration::from_secs(1)),
            local: Local {
                cache: cache.clone(),
                health: health.clone(),
                node_name: Some("edge-1".into()),
                kubelet: Arc::new(KubeletLease::default()),
                min_request_timeout: Duration::from_secs(1800),
                filters: None,
            },
            watch_ends: WatchEnds {
                health,
                stopping,
                filters: filters.clone(),
                informers: None,
            },
            cache,
            filters,
            informers: None,
            multiplexer: None,
            pool: crate::node::pool::Pool {
                name: tokio::sync::watch::channel(None).1,
                leaders: Arc::default(),
            },
            late_answer: Duration::from_secs(1),
            in_flight: InFlightLimit::new(100),
            known: KnownCredentials::default(),
            certificates: Vec::new(),
            spool_dir: scratch.to_owned(),
        };
        Ok(HubFixture {
            state: Arc::new(state),
            _signals: (health_tx, stopping_tx),
        })
    }

    /// Serves one hub request from `peer`.
    pub async fn handle<B>(&self, request: Request<B>, peer: SocketAddr) -> Response<ResponseBody>
    where
        B: hyper::body::Body,
        B::Error: Into<BoxError>,
    {
        super::hub::handle(self.state.clone(), request, peer).await
    }
}

/// Caches, for kubelet, a Secret in `kube-system` and a ConfigMap that quotes it.
fn cache_objects(store: &dyn StoreWriter) -> Result<(), BoxError> {
    let objects: [(&str, String); 2] = [
        (
            "secrets",
            format!(
                r#"{{"kind":"Secret","apiVersion":"v1","metadata":{{"name":"s","namespace":"kube-system","resourceVersion":"5"}},"data":{{"token":"{SECRET_VALUE}"}}}}"#
            ),
        ),
        (
            "configmaps",
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"kube-system","resourceVersion":"6"},"data":{"a":"b"}}"#.to_owned(),
        ),
    ];
    for (list, (resource, object)) in objects.into_iter().enumerate() {
        let resource = ResourceKey {
            component: "kubelet".into(),
            resource: resource.into(),
            version: "v1".into(),
            group: String::new(),
        };
        let name = if resource.resource == "secrets" {
            "s"
        } else {
            "c"
        };
        let list = list as u64;
        store.apply(
            &[
                WriteOp::Stage {
                    list,
                    key: resource.object_key("kube-system", name),
                    object: Bytes::from(object),
                },
                WriteOp::Commit {
                    list,
                    set: SetKey::new(resource, "", "", ""),
                    meta: SetMeta {
                        resource_version: "6".into(),
                        items: 1,
                        ..SetMeta::default()
                    },
                },
            ],
            false,
        )?;
    }
    Ok(())
}
