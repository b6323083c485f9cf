//! Which lists and watches the multiplexer answers, and with what: the resourceVersion
//! semantics of kube-apiserver's watch cache, on the shared state.
//!
//! Answered: lists and watches of a pool-scope resource (all namespaces or one), with label
//! selectors and `metadata.name` / `metadata.namespace` field selectors, once the state
//! holds a list. A list is the state at its version — for `resourceVersion` unset or `0`,
//! or `n` the state has reached; `Exact` only at the state's
//! version. `limit` is not honoured (the whole list, no `continue`, as the watch cache does
//! for version `0`). A watch unset or from `0` starts with every object as ADDED; from `n`
//! it resumes from the window, or gets `410 Expired` when `n` is older than it.
//! Everything else — continuations, `sendInitialEvents`, other field selectors, a version
//! the state has not reached while the cloud is up — goes on as before: upstream, or to the
//! local proxy offline.

use std::sync::Arc;
use std::time::Duration;

use http::Response;
use prometheus_client::metrics::counter::Counter;

use super::body::SharedBody;
use super::list;
use super::metrics::{AnswerLabels, ResourceLabels};
use super::refilter::Refilter;
use super::registry::Multiplexer;
use super::state::{Shared, Waited};
use super::watch::{self, Sight, Watching};
use crate::cache::Selectors;
use crate::request::{RequestContext, Verb};

/// How long a node client's request waits for a state's first list when none is under way,
/// and the steps it waits in while one is (kube-apiserver's watch cache makes lists wait so
/// while it initializes).
pub const READY_WITHIN: Duration = Duration::from_secs(3);

/// Whether, and how, the multiplexer answers a request.
pub enum Answer {
    /// Not the multiplexer's: forward it as before.
    Pass,
    /// The response, from the shared state.
    Serve(Response<SharedBody>),
}

impl Multiplexer {
    /// Answers `context`'s list or watch from a shared state, if it is one the multiplexer
    /// answers; `online` says whether the cloud could answer instead. A watch without
    /// `timeoutSeconds` lasts `min_request_timeout` × 1–2; a filtered one re-filters by
    /// `refilter` (what it sends again counted in `edgegate_multiplexer_resends_total`).
    pub fn answer(
        &self,
        context: &RequestContext,
        online: bool,
        min_request_timeout: Duration,
        refilter: Option<Refilter>,
    ) -> Answer {
        let Some((shared, since)) = self.answers(context) else {
            return Answer::Pass;
        };
        let info = &context.info;
        let resource = resource_of(context);
        // Only a filtered watch sends objects again: the others need no counter.
        let refilter = refilter.map(|refilter| {
            let labels = ResourceLabels {
                resource: resource.clone(),
            };
            (
                refilter,
                self.metrics.resends.get_or_create(&labels).clone(),
            )
        });
        let timeout = min_request_timeout;
        let answer = self.answer_from(context, &shared, since, online, timeout, refilter);
        if let Answer::Serve(_) = answer {
            self.metrics
                .answers
                .get_or_create(&AnswerLabels {
                    resource,
                    verb: info.verb.as_str(),
                })
                .inc();
        }
        answer
    }

    fn answer_from(
        &self,
        context: &RequestContext,
        shared: &Arc<Shared>,
        since: Option<u64>,
        online: bool,
        min_request_timeout: Duration,
        refilter: Option<(Refilter, Counter)>,
    ) -> Answer {
        let Some(current) = shared.version() else {
            return Answer::Pass;
        };
        if let (Some(wanted), Some(Verb::List)) = (since, context.info.verb.api()) {
            let exact = context.query.resource_version_match.as_deref() == Some("Exact");
            let fresh = if exact {
                current == wanted
            } else {
                current >= wanted
            };
            // Offline, a list newer than the state gets the state: nothing newer is known.
            if !fresh && (online || exact) {
                return Answer::Pass;
            }
        }
        serve(context, shared, since, min_request_timeout, refilter)
    }

    /// For a request the multiplexer would answer once its state holds a list, a wait for
    /// that list while it is under way and not stalled, or `within` when none is
    /// ([`READY_WITHIN`] for the node's clients; see [`Shared::first_list`]): the clients
    /// that start with the gateway then share its watch, rather than each holding its own
    /// upstream, and on a thin link they do not each list upstream beside it. Owns what it
    /// waits on.
    pub fn until_ready(
        &self,
        context: &RequestContext,
        within: Duration,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        let (shared, _) = self.answers(context)?;
        if shared.version().is_some() {
            return None;
        }
        let waited = shared.first_list(within);
        let resource = resource_of(context);
        Some(async move {
            let started = tokio::time::Instant::now();
            let waited_for = waited.await;
            if waited_for != Waited::Listed {
                let waited = started.elapsed().as_secs();
                tracing::info!(%resource, waited, reason = waited_for.reason(), "a client's wait for the shared state's first list ended without it: the request goes on without the multiplexer");
            }
        })
    }

    /// The shared state a request is answered from and the version it asks for (`None`:
    /// unset or `0`), if the multiplexer answers it.
    fn answers(&self, context: &RequestContext) -> Option<(Arc<Shared>, Option<u64>)> {
        let info = &context.info;
        let query = &context.query;
        if !info.is_resource_request
            || !info.subresource.is_empty()
            // A name from the path (`/watch/…/name`), not from a field selector.
            || (!info.name.is_empty() && query.exact_name.as_deref() != Some(info.name.as_str()))
            || !matches!(info.verb.api(), Some(Verb::List | Verb::Watch))
            || query.continue_token.is_some()
            || query.send_initial_events.is_some()
            || !supported_fields(&query.fields)
        {
            return None;
        }
        let shared = self.shared(&info.api_group, &info.api_version, &info.resource)?;
        let since = match query.resource_version.as_deref() {
            None | Some("0") => None,
            Some(version) => Some(version.parse::<u64>().ok()?),
        };
        Some((shared, since))
    }
}

/// The resource a request is for, as the multiplexer's metrics and log name it.
fn resource_of(context: &RequestContext) -> String {
    let info = &context.info;
    super::resource::Resource {
        group: info.api_group.clone(),
        version: info.api_version.clone(),
        plural: info.resource.clone(),
    }
    .to_string()
}

/// The answer from `shared`, which holds a list.
fn serve(
    context: &RequestContext,
    shared: &Arc<Shared>,
    since: Option<u64>,
    min_request_timeout: Duration,
    refilter: Option<(Refilter, Counter)>,
) -> Answer {
    let query = &context.query;
    // Selectors it cannot read go to the apiserver, which says why.
    let Ok(selectors) = Selectors::new(&query.labels, &query.fields) else {
        return Answer::Pass;
    };
    let namespace = context.info.namespace.clone();
    if context.info.verb == Verb::List {
        let (objects, version) = shared.snapshot(&namespace);
        return Answer::Serve(list::respond(
            &shared.list_type(),
            objects,
            version,
            selectors,
        ));
    }
    let (start, changes) = match shared.watch(since, &namespace) {
        Ok(started) => started,
        Err(expired) => return Answer::Serve(watch::expired(&expired.to_string())),
    };
    let list = shared.list_type();
    let kind = list.kind.strip_suffix("List").unwrap_or(&list.kind);
    let watching = Watching {
        shared: shared.clone(),
        start,
        changes,
        versions: shared.versions(),
        sight: Sight {
            namespace,
            selectors,
        },
        since: since.unwrap_or_default(),
        bookmarks: query
            .allow_watch_bookmarks
            .then(|| (kind.to_owned(), list.api_version.clone())),
        lasts: query.watch_lasts(min_request_timeout, fastrand::f64()),
        resent: refilter
            .as_ref()
            .map(|(_, resent)| resent.clone())
            .unwrap_or_default(),
        refilter: refilter.map(|(refilter, _)| refilter),
    };
    Answer::Serve(watch::respond(watching))
}

/// Whether a field selector uses only the fields every resource supports (kube-apiserver
/// refuses others per resource, which only it knows).
fn supported_fields(selector: &str) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|term| !term.is_empty())
        .all(|term| {
            let field = term.split(['=', '!']).next().unwrap_or_default().trim();
            matches!(field, "metadata.name" | "metadata.namespace")
        })
}

#[cfg(test)]
#[path = "answer/tests.rs"]
mod tests;
