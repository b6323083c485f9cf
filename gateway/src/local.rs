//! The local proxy: answers from the cache while no apiserver is reachable, so the node's
//! components keep running.
//!
//! | verb | offline answer |
//! |---|---|
//! | get | the cached object, or 404; of a subresource, the object for `status` (it is the object), else 503 |
//! | list | the cached list (selectors applied; paged and versioned as kube-apiserver does, `local/paging.rs`), or 404 when nothing covering it was cached; kubelet's pod list with no pods is 404, so kubelet does not kill its pods |
//! | watch | the set's changes after the client's resourceVersion as events (and a bookmark when asked), then nothing until the cloud is back (or `timeoutSeconds`), then a clean end so the client re-lists |
//! | create | of a pod bound to this node (a mirror pod), on its identity: made in the cached sets that hold it (the local layer), 201 with the pod; of anything else, the request body echoed with 201 (JSON or protobuf, as it came) |
//! | update, patch | of the node's own Node and pods (and their status), on its identity: applied to the cached copies and answered with the result (the local layer); of anything else, the cached object, nothing applied; kubelet's lease renewal is echoed |
//! | delete | kubelet's final delete (grace period 0) of a pod bound to this node: removed from the cached sets, 200 with the pod; any other, 403 |
//!
//! Reads are answered in JSON, or in protobuf to a client that takes protobuf and not JSON
//! (`local/protobuf_answer.rs`); one that takes neither is 406.
//!
//! With `--node-name`, kubelet's writes of its node lease are answered here online too
//! ([`Local::kubelet_lease`]): the gateway's heartbeat is the node's lease in the cloud.

mod continue_token;
mod endpoints;
mod error;
mod layer;
mod lifecycle;
mod list;
mod media;
mod metadata_answer;
mod own;
mod paging;
mod patch;
mod protobuf_answer;
mod refilter;
mod relist;
mod strategic;
mod watch;
mod watch_options;
mod write;

use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::cache::{Cache, ResourceKey, Scope};
use crate::reply::{ResponseBody, json};
use crate::request::{Answered, RequestContext, RequestInfo, Shape, Verb};
use crate::stream::Transform;
use crate::upstream::{HealthWatch, KubeletLease, NODE_LEASE_NAMESPACE};

pub use error::LocalError;
/// The offline answers to writes, for the `local_write` fuzz target ([`crate::fuzzing`]).
#[cfg(feature = "fuzzing")]
pub(crate) use write::{create, echo};

/// The filter chain, as the local layer asks it (the server wires the filter host in).
pub trait LocalFilters: Send + Sync {
    /// The filtering a watch of `info` by `component` passes; `None` when no filter applies.
    fn session(&self, info: &RequestInfo, component: &str) -> Option<Box<dyn Transform>>;
}

/// What the local proxy answers with.
#[derive(Clone)]
pub struct Local {
    /// The cache.
    pub cache: Arc<Cache>,
    /// "Some apiserver is healthy": offline watches end when it turns true.
    pub health: HealthWatch,
    /// This node's name (`--node-name`): kubelet's writes of its lease are answered here.
    pub node_name: Option<String>,
    /// kubelet's renewals of that lease, for the heartbeat.
    pub kubelet: Arc<KubeletLease>,
    /// `--min-request-timeout`: an offline watch without `timeoutSeconds` lasts a random
    /// time between once and twice this.
    pub min_request_timeout: std::time::Duration,
    /// The filters a cached copy the node's own write changed passes again (none: it is
    /// stored as changed).
    pub filters: Option<Arc<dyn LocalFilters>>,
}

/// The cache's key of what `context` reads, for its cache component.
fn resource_of(context: &RequestContext) -> ResourceKey {
    ResourceKey {
        component: context.cache_component.clone(),
        resource: context.info.resource.clone(),
        version: context.info.api_version.clone(),
        group: context.info.api_group.clone(),
    }
}

/// Whether `info`, cached for `cache_component`, is kubelet's own node lease.
fn is_kubelet_lease(info: &RequestInfo, cache_component: &str) -> bool {
    cache_component == "kubelet"
        && info.resource == "leases"
        && info.api_group == "coordination.k8s.io"
        && info.subresource.is_empty()
}

/// What a read covers (namespace, label and field selectors), owned: the store is read on a
/// blocking thread.
struct ReadScope {
    namespace: String,
    labels: String,
    fields: String,
}

impl ReadScope {
    /// The namespace and selectors `context` reads.
    fn of(context: &RequestContext) -> ReadScope {
        ReadScope {
            namespace: context.info.namespace.clone(),
            labels: context.query.labels.clone(),
            fields: context.query.fields.clone(),
        }
    }

    fn scope(&self) -> Scope<'_> {
        Scope {
            namespace: &self.namespace,
            labels: &self.labels,
            fields: &self.fields,
        }
    }
}

impl Local {
    /// Whether `info` from `component` is kubelet creating or renewing this node's lease,
    /// which the gateway answers itself whether or not the cloud is reachable.
    pub fn answers_kubelet_lease(&self, info: &RequestInfo, component: &str) -> bool {
        let Some(node) = &self.node_name else {
            return false;
        };
        is_kubelet_lease(info, component)
            && info.namespace == NODE_LEASE_NAMESPACE
            && match info.verb.api() {
                Some(Verb::Create) => info.name.is_empty(),
                Some(Verb::Update) => info.name == *node,
                _ => false,
            }
    }

    /// Answers kubelet's create or renewal of this node's lease: the lease is echoed (no
    /// conflict with the heartbeat can arise), and the renewal noted, so the heartbeat keeps
    /// renewing the lease in the cloud while kubelet lives.
    pub async fn kubelet_lease<B>(
        &self,
        info: &RequestInfo,
        request: Request<B>,
    ) -> Result<Response<ResponseBody>, LocalError>
    where
        B: http_body::Body<Data = bytes::Bytes>,
        B::Error: Into<crate::error::BoxError>,
    {
        let code = if info.verb == Verb::Create {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        let response = write::echo(request, code).await?;
        self.kubelet.renewed();
        Ok(response)
    }

    /// Answers `request` from the cache; `node` when it comes on the node's own identity
    /// (the plain proxy), whose writes of the node's own objects the local layer takes.
    pub async fn serve(
        &self,
        context: &RequestContext,
        request: Request<Incoming>,
        node: bool,
    ) -> Result<Response<ResponseBody>, LocalError> {
        let Some(verb) = context.info.verb.api() else {
            return Err(unanswerable("proxy requests need the cloud"));
        };
        match verb {
            Verb::Get | Verb::List | Verb::Watch => self.read(context).await,
            _ if !self.answers(context) => Err(unanswerable(
                "this request cannot be answered from the local cache",
            )),
            Verb::Create if node => match self.create_own(context, request).await? {
                Ok(answer) => Ok(answer),
                Err(request) => write::create(context, request).await,
            },
            Verb::Create => write::create(context, request).await,
            Verb::Update | Verb::Patch
                if is_kubelet_lease(&context.info, &context.cache_component) =>
            {
                write::echo(request, StatusCode::OK).await
            }
            Verb::Update | Verb::Patch => {
                if node {
                    // The node's own objects take its writes; anything else is answered
                    // with what the cache holds.
                    if let Ok(answer) = self.write_own(context, request).await? {
                        return Ok(answer);
                    }
                }
                self.cache.caught_up().await;
                self.get(context)
            }
            Verb::Delete if node => match self.delete_own(context, request).await? {
                Ok(answer) => Ok(answer),
                Err(_) => Err(LocalError::Delete),
            },
            Verb::Delete | Verb::DeleteCollection => Err(LocalError::Delete),
        }
    }

    /// Answers a read (get, list, watch) from the cache.
    pub async fn read(
        &self,
        context: &RequestContext,
    ) -> Result<Response<ResponseBody>, LocalError> {
        if !self.answers(context) {
            return Err(unanswerable(
                "this request cannot be answered from the local cache",
            ));
        }
        if context.answered == Answered::Neither {
            return Err(LocalError::NotAcceptable(
                "the cloud is unreachable and the local cache answers in application/json or application/vnd.kubernetes.protobuf only".to_owned(),
            ));
        }
        if context.shape == Shape::Metadata {
            if context.answered != Answered::Json {
                return Err(LocalError::NotAcceptable(
                    "the cloud is unreachable and the local cache answers metadata alone in application/json only".to_owned(),
                ));
            }
            let whole = self.whole(context).await?;
            let verb = context.info.verb.api().unwrap_or(Verb::Get);
            return metadata_answer::reshaped(verb, whole).await;
        }
        self.whole(context).await
    }

    /// Answers a read of whole objects.
    async fn whole(&self, context: &RequestContext) -> Result<Response<ResponseBody>, LocalError> {
        // Never a state older than what a client was already sent.
        self.cache.caught_up().await;
        match context.info.verb.api() {
            Some(Verb::Get) => self.get(context),
            // An empty name in the path (`pods//log`) makes, as kube-apiserver derives it, a
            // collection's subresource: no read the apiserver serves, so not its list.
            Some(Verb::List | Verb::Watch) if !context.info.subresource.is_empty() => {
                Err(unanswerable(&format!(
                    "the {} subresource of {} cannot be answered offline",
                    context.info.subresource, context.info.resource
                )))
            }
            Some(Verb::List) => self.list(context).await,
            Some(Verb::Watch) => self.watch(context).await,
            _ => Err(unanswerable("only reads are answered here")),
        }
    }

    /// Whether the cache can answer this component's request at all (and notes the use).
    fn answers(&self, context: &RequestContext) -> bool {
        let answers = context.info.is_resource_request
            && self
                .cache
                .policy()
                .caches_component(&context.cache_component);
        if answers {
            self.cache.touch(&context.cache_component);
        }
        answers
    }

    fn get(&self, context: &RequestContext) -> Result<Response<ResponseBody>, LocalError> {
        // Only whole objects and their `status` are cached; any other subresource (`log`,
        // `scale`, …) is something else, which the parent object must never stand in for.
        let subresource = context.info.subresource.as_str();
        if !subresource.is_empty() && subresource != "status" {
            self.cache.metrics().misses.inc();
            return Err(unanswerable(&format!(
                "the {subresource} subresource of {} {:?} cannot be answered offline",
                context.info.resource, context.info.name
            )));
        }
        let key = resource_of(context).object_key(&context.info.namespace, &context.info.name);
        match self.cache.store().get(&key) {
            Ok(Some(object)) if context.answered == Answered::Protobuf => {
                self.cache.metrics().hits.inc();
                let resource = resource_of(context);
                let names = protobuf_answer::TypeNames::of(self.cache.store().as_ref(), &resource);
                protobuf_answer::object_answer(&object, &names.unwrap_or_default())
            }
            Ok(Some(object)) => {
                self.cache.metrics().hits.inc();
                Ok(json(StatusCode::OK, object))
            }
            Ok(None) => {
                self.cache.metrics().misses.inc();
                Err(LocalError::NotCached(format!(
                    "{} {:?} is not in the local cache",
                    context.info.resource, context.info.name
                )))
            }
            Err(error) => Err(LocalError::store(&error)),
        }
    }
}

fn unanswerable(reason: &str) -> LocalError {
    LocalError::Unanswerable(reason.to_owned())
}

#[cfg(test)]
mod tests;
