//! The plan of one response: which filters it passes, whether it is teed into the cache, and
//! when an open watch must end. Made before the request is forwarded, because a planned
//! response must come back as JSON, uncompressed.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use http::header::{ACCEPT, ACCEPT_ENCODING, HeaderValue};

use super::State;
use crate::cache::CacheTarget;
use crate::filter::{LookupUse, Session};
use crate::request::RequestInfo;
use crate::stream::{Stop, StopSignal};

/// Open watches whose filter chain changed end at a random moment within this window, so a
/// node's clients do not all re-list at once.
const RELIST_JITTER: Duration = Duration::from_secs(1);
/// Watches whose filters' lookups changed are spread wider: such changes are not urgent, and
/// every node of the cluster sees them at the same moment.
const LOOKUP_RELIST_JITTER: Duration = Duration::from_secs(5);

/// What a resource request's response passes through.
pub struct Plan {
    /// The filter session, if any filter applies.
    pub session: Option<Session>,
    /// Where the response is cached, if it is. The tee is made only for a response that is
    /// framed, when the answer is in: an error or a protobuf answer is not a list
    /// the cache gave up on.
    pub cache: Option<CacheTarget>,
    /// Identity of the filters that apply (none is an identity too), to tell when a new
    /// generation changes them: a watch then ends, filtered or not.
    pub fingerprint: u64,
    /// Whether the client takes plain JSON.
    json: bool,
    /// Whether it is a watch.
    watch: bool,
}

impl Plan {
    /// The plan of a resource request (`None` for others): filtered for `component`,
    /// cached for `cache_component` (the component, or its caller's partition). Nothing
    /// filters or caches the response when the client cannot take JSON (a protobuf-only
    /// client is passed through uncached) or asks for a server-side table.
    pub fn of(
        state: &Arc<State>,
        info: &RequestInfo,
        component: &str,
        cache_component: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Option<Plan> {
        if !info.is_resource_request {
            return None;
        }
        let generation = state.filters.current();
        let fingerprint = generation.fingerprint(info, component);
        let watch = info.verb == crate::request::Verb::Watch;
        if !takes_json(headers) {
            return Some(Plan {
                session: None,
                cache: None,
                fingerprint,
                json: false,
                watch,
            });
        }
        let session = generation.session(info, component);
        Some(Plan {
            session,
            cache: state.cache.policy().target(cache_component, info, query),
            fingerprint,
            json: true,
            watch,
        })
    }

    /// Whether the response must be framed: something filters or caches it, or it is a
    /// watch (which can then be told to re-list when its filtering changes).
    pub fn frames(&self) -> bool {
        self.json && (self.watch || self.session.is_some() || self.cache.is_some())
    }
}

/// Asks upstream for plain JSON: what the framing reads.
pub fn ask_for_json(headers: &mut HeaderMap) {
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    headers.remove(ACCEPT_ENCODING);
}

/// Whether the client accepts plain JSON (client-go sends
/// `application/vnd.kubernetes.protobuf,application/json`); a `Table` request does not count.
fn takes_json(headers: &HeaderMap) -> bool {
    let accepts: Vec<&str> = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    if accepts.is_empty() {
        return true;
    }
    if accepts.iter().any(|a| a.contains("as=")) {
        return false;
    }
    accepts.iter().any(|a| {
        let media = a.split(';').next().unwrap_or_default().trim();
        matches!(media, "application/json" | "application/*" | "*/*")
    })
}

/// Whether an upstream response is the JSON the framing reads.
pub fn is_plain_json(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json") && !t.contains("as="))
}

/// Resolves when an open watch must end: the cloud became unreachable (the client re-lists
/// once it is back), the filters that apply to it changed or — for a filtered watch — a kind
/// its filters have looked up changed (both after a jitter), or the gateway is stopping.
pub fn watch_stop(
    state: &Arc<State>,
    info: RequestInfo,
    component: String,
    fingerprint: u64,
    lookups: Option<LookupUse>,
) -> StopSignal {
    // A kind its filters read changed: the watch is filtered anew after a re-list.
    let feeds = state
        .informers
        .as_ref()
        .zip(lookups)
        .map(|(informers, lookups)| (informers.changes(), lookups));
    let mut health = state.health.clone();
    let mut stopping = state.stopping.clone();
    let filters = state.filters.clone();
    let mut generations = filters.subscribe();
    Box::pin(async move {
        let lost = health.wait_for(|healthy| !*healthy);
        let stop = stopping.wait_for(|stopping| *stopping);
        let changed = async {
            loop {
                if generations.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
                if filters.current().fingerprint(&info, &component) != fingerprint {
                    tokio::time::sleep(jitter(RELIST_JITTER)).await;
                    tracing::debug!(%component, resource = %info.resource, "the filter chain changed: ending the watch");
                    return;
                }
            }
        };
        let looked_up = async {
            let Some((mut changes, lookups)) = feeds else {
                return std::future::pending::<()>().await;
            };
            let mut seen = *changes.borrow_and_update();
            loop {
                if changes.changed().await.is_err() {
                    return std::future::pending::<()>().await;
                }
                let now = *changes.borrow_and_update();
                let changed = now.changed_since(&seen);
                seen = now;
                if lookups.reads_any(changed) {
                    break;
                }
            }
            tokio::time::sleep(jitter(LOOKUP_RELIST_JITTER)).await;
            tracing::debug!(%component, resource = %info.resource, "what its filters looked up changed: ending the watch");
        };
        tokio::select! {
            _ = lost => Stop::End,
            _ = stop => Stop::End,
            () = changed => Stop::Relist("the gateway's filters for this watch changed: re-list".into()),
            () = looked_up => Stop::Relist("what this watch's filters look up changed: re-list".into()),
        }
    })
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

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, value.parse().unwrap());
        headers
    }

    #[test]
    fn client_go_and_plain_clients_take_json() {
        assert!(takes_json(&HeaderMap::new()));
        assert!(takes_json(&accept(
            "application/vnd.kubernetes.protobuf,application/json"
        )));
        assert!(takes_json(&accept("application/json, */*")));
        assert!(!takes_json(&accept("application/vnd.kubernetes.protobuf")));
        assert!(!takes_json(&accept(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        )));
    }

    #[test]
    fn only_plain_json_responses_are_framed() {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            "application/json".parse().unwrap(),
        );
        assert!(is_plain_json(&headers));
        headers.insert(
            http::header::CONTENT_TYPE,
            "application/vnd.kubernetes.protobuf".parse().unwrap(),
        );
        assert!(!is_plain_json(&headers));
        assert!(!is_plain_json(&HeaderMap::new()));
    }

    #[test]
    fn jitter_stays_in_its_window() {
        assert!((0..100).all(|_| jitter(RELIST_JITTER) < RELIST_JITTER));
    }
}
