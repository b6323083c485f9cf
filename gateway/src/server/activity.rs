//! What one connection has in flight, so a connection with nothing in flight for too long
//! can be closed: a client that connects and sends nothing, or keeps an idle HTTP/2
//! connection open, would otherwise hold a task and a file descriptor for ever.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use http::Response;
use http_body_util::BodyExt;
use tokio::sync::Notify;

use crate::reply::ResponseBody;

/// The requests of one connection in flight.
#[derive(Default)]
pub(super) struct Activity {
    in_flight: AtomicUsize,
    /// Whether a request ever came: until one does, the connection is only being opened.
    served: AtomicBool,
    /// Woken whenever `in_flight` changes.
    changed: Notify,
}

/// One request in flight, until dropped.
pub(super) struct Busy(Arc<Activity>);

impl Activity {
    /// A connection's activity, nothing in flight yet.
    pub(super) fn new() -> Arc<Activity> {
        Arc::new(Activity::default())
    }

    /// A request came: in flight until the returned guard is dropped.
    pub(super) fn enter(self: &Arc<Self>) -> Busy {
        self.served.store(true, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_waiters();
        Busy(self.clone())
    }

    /// Resolves once nothing has been in flight for `first` before the first request, or
    /// for `then` after one.
    pub(super) async fn idle(&self, first: Duration, then: Duration) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the count is read, so no change between the two is missed.
            changed.as_mut().enable();
            if self.in_flight.load(Ordering::Acquire) > 0 {
                changed.await;
                continue;
            }
            let wait = if self.served.load(Ordering::Relaxed) {
                then
            } else {
                first
            };
            if tokio::time::timeout(wait, changed).await.is_err() {
                return;
            }
        }
    }
}

impl Busy {
    /// Keeps the request in flight until `response`'s body has been sent or dropped: a watch
    /// is in flight for as long as it streams.
    pub(super) fn hold(self, response: Response<ResponseBody>) -> Response<ResponseBody> {
        response.map(|body| {
            body.map_frame(move |frame| {
                let _held = &self;
                frame
            })
            .boxed_unsync()
        })
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    const FIRST: Duration = Duration::from_secs(30);
    const THEN: Duration = Duration::from_secs(90);

    fn response() -> Response<ResponseBody> {
        crate::reply::text(http::StatusCode::OK, "ok".to_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_sends_nothing_is_idle_after_the_first_wait() {
        let activity = Activity::new();
        let started = tokio::time::Instant::now();
        activity.idle(FIRST, THEN).await;
        assert_eq!(started.elapsed(), FIRST);
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_idle_while_a_response_streams_and_the_wait_restarts_after_it() {
        let activity = Activity::new();
        let idle = activity.idle(FIRST, THEN);
        tokio::pin!(idle);
        tokio::time::sleep(FIRST / 2).await;
        let held = activity.enter().hold(response());
        // Hours of a watch streaming: never idle.
        tokio::select! {
            () = &mut idle => panic!("idle while a response was in flight"),
            () = tokio::time::sleep(Duration::from_secs(4 * 3600)) => {}
        }
        let body = held.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "ok");
        let ended = tokio::time::Instant::now();
        idle.await;
        assert_eq!(ended.elapsed(), THEN, "the wait after a request");
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_dropped_unanswered_leaves_the_connection_idle() {
        let activity = Activity::new();
        let busy = activity.enter();
        let idle = activity.idle(FIRST, THEN);
        tokio::pin!(idle);
        assert!((&mut idle).now_or_never().is_none());
        drop(busy);
        let dropped = tokio::time::Instant::now();
        idle.await;
        assert_eq!(dropped.elapsed(), THEN);
    }
}
