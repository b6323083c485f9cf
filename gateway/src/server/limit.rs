//! `--max-requests-in-flight`: short requests served at once beyond the limit are refused
//! with `429 Too Many Requests` and `Retry-After`, as kube-apiserver's and YurtHub's
//! max-in-flight filter refuses them. Watches and the other long-running requests (logs,
//! exec, attach, port-forward, proxy, upgrades) are not counted: they would hold their slot
//! for hours.

use std::sync::Arc;

use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;
use crate::refusal::{Fault, Refusal, RefusalStatus, refuse};
use crate::reply::ResponseBody;
use crate::request::{RequestInfo, RequestVerb, Verb};

/// Seconds a refused client is asked to wait, as kube-apiserver asks.
const RETRY_AFTER_SECONDS: &str = "1";

/// Subresources that stream for as long as the client wants.
const LONG_RUNNING_SUBRESOURCES: [&str; 5] = ["attach", "exec", "log", "portforward", "proxy"];

/// The slots of short requests.
pub(crate) struct InFlightLimit(Option<Arc<Semaphore>>);

/// A short request's slot, held until its response body ends (or `None`: not counted).
pub(crate) type Slot = Option<OwnedSemaphorePermit>;

impl InFlightLimit {
    /// `max` slots; 0 sets no limit.
    pub(crate) fn new(max: usize) -> InFlightLimit {
        InFlightLimit((max > 0).then(|| Arc::new(Semaphore::new(max))))
    }

    /// Takes a slot for `info`, or refuses it.
    pub(crate) fn enter(&self, info: &RequestInfo, upgrading: bool) -> Result<Slot, Refused> {
        let Some(slots) = &self.0 else {
            return Ok(None);
        };
        if upgrading || is_long_running(info) {
            return Ok(None);
        }
        match slots.clone().try_acquire_owned() {
            Ok(permit) => Ok(Some(permit)),
            Err(_) => Err(Refused),
        }
    }
}

/// Keeps `slot` taken until `response`'s body has been sent (or dropped).
pub(crate) fn hold(response: Response<ResponseBody>, slot: Slot) -> Response<ResponseBody> {
    match slot {
        None => response,
        Some(permit) => response.map(|body| {
            body.map_frame(move |frame| {
                let _held = &permit;
                frame
            })
            .boxed_unsync()
        }),
    }
}

/// Whether `info` may stream for as long as the client wants.
fn is_long_running(info: &RequestInfo) -> bool {
    matches!(
        info.verb,
        RequestVerb::Api(Verb::Watch) | RequestVerb::Proxy
    ) || LONG_RUNNING_SUBRESOURCES.contains(&info.subresource.as_str())
}

/// Every slot is taken.
#[derive(Debug, thiserror::Error)]
#[error("Too many requests, please try again later.")]
pub(crate) struct Refused;

impl Refusal for Refused {
    fn refusal_status(&self) -> RefusalStatus {
        RefusalStatus {
            code: StatusCode::TOO_MANY_REQUESTS,
            reason: "TooManyRequests",
            fault: Fault::Client,
            kind: "in_flight_limit",
        }
    }
}

impl Refused {
    /// The `429` Status to send, with its `Retry-After`, counted in `metrics`.
    pub(crate) fn into_response(self, metrics: &Metrics) -> Response<ResponseBody> {
        let mut response = refuse(&self, metrics);
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_static(RETRY_AFTER_SECONDS),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http::Method;

    use super::*;

    fn info(method: Method, path: &str) -> RequestInfo {
        let (path, query) = path
            .split_once('?')
            .map_or((path, None), |(p, q)| (p, Some(q)));
        RequestInfo::parse(&method, path, query)
    }

    fn list() -> RequestInfo {
        info(Method::GET, "/api/v1/pods")
    }

    /// A response being sent: its body is taken when the client has read it.
    fn response() -> Response<ResponseBody> {
        crate::reply::full(StatusCode::OK, "text/plain", Bytes::from_static(b"ok"))
    }

    #[tokio::test]
    async fn short_requests_beyond_the_limit_get_a_429_status_until_one_ends() {
        let limit = InFlightLimit::new(2);
        let first = limit.enter(&list(), false).unwrap();
        let open = hold(response(), first);
        let second = limit.enter(&info(Method::PUT, "/api/v1/namespaces/a/pods/p"), false);
        let second = second.unwrap();

        let refused = limit
            .enter(&list(), false)
            .unwrap_err()
            .into_response(&Metrics::new());
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        let body = refused.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (status["kind"].as_str(), status["code"].as_u64()),
            (Some("Status"), Some(429))
        );
        assert_eq!(status["reason"], "TooManyRequests");

        // Long-running requests take no slot and are never refused.
        for long in [
            info(Method::GET, "/api/v1/pods?watch=true"),
            info(Method::GET, "/api/v1/watch/pods"),
            info(Method::GET, "/api/v1/namespaces/a/pods/p/log"),
            info(Method::POST, "/api/v1/namespaces/a/pods/p/exec"),
        ] {
            assert!(limit.enter(&long, false).unwrap().is_none(), "{long:?}");
        }
        assert!(limit.enter(&list(), true).unwrap().is_none(), "an upgrade");

        // A slot is given back when the request's body has been sent, not before.
        drop(second);
        let third = limit.enter(&list(), false).unwrap();
        assert!(limit.enter(&list(), false).is_err());
        let whole = open.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(whole, "ok");
        assert!(limit.enter(&list(), false).unwrap().is_some());
        drop(third);
    }

    #[test]
    fn zero_sets_no_limit() {
        let limit = InFlightLimit::new(0);
        let held: Vec<_> = (0..1000)
            .map(|_| limit.enter(&list(), false).unwrap())
            .collect();
        assert!(held.iter().all(Option::is_none));
    }
}
