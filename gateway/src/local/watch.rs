//! Offline watches: the cached objects newer than the client's resourceVersion as events,
//! then nothing until the cloud is back or the watch times out; then a clean end, so the
//! client re-lists — from the cloud, if it is back. (YurtHub sends nothing at all.)

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::mpsc;

use super::{Ask, Local};
use crate::BoxError;
use crate::cache::ReadError;
use crate::reply::ResponseBody;
use crate::upstream::HealthWatch;

/// How long an offline watch lasts when the client gave no `timeoutSeconds`
/// (kube-apiserver's default minimum request timeout).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Waiting {
    backlog: Option<mpsc::Receiver<Result<Bytes, BoxError>>>,
    health: HealthWatch,
    deadline: tokio::time::Instant,
}

impl Local {
    /// Answers a watch from the cache.
    pub(super) async fn watch(&self, ask: &Ask<'_>) -> http::Response<ResponseBody> {
        let since = ask
            .query
            .resource_version
            .clone()
            .unwrap_or_else(|| "0".to_owned());
        let (found, chunks) = self.stream_from_store(ask, Some(since), false);
        let backlog = match found.await {
            Ok(Ok(_)) => {
                self.cache.metrics().hits.inc();
                Some(chunks)
            }
            // Nothing cached yet: the watch still waits, like one that has seen no change.
            Ok(Err(ReadError::NotCached)) => {
                self.cache.metrics().misses.inc();
                None
            }
            Ok(Err(error)) => return self.read_failed(&error),
            Err(_) => None,
        };
        let timeout = ask
            .query
            .timeout_seconds
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        let waiting = Waiting {
            backlog,
            health: self.health.clone(),
            deadline: tokio::time::Instant::now() + timeout,
        };
        let events = futures_util::stream::unfold(waiting, |mut state| async move {
            if let Some(backlog) = state.backlog.as_mut() {
                match backlog.recv().await {
                    Some(chunk) => return Some((chunk.map(http_body::Frame::data), state)),
                    None => state.backlog = None,
                }
            }
            tokio::select! {
                _ = state.health.wait_for(|healthy| *healthy) => {}
                () = tokio::time::sleep_until(state.deadline) => {}
            }
            None
        });
        let mut response = http::Response::new(StreamBody::new(events).boxed_unsync());
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }
}
