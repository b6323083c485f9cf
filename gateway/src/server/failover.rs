//! Sending a request upstream with one failover: when the server picked cannot answer it,
//! the request goes once to the next healthy server, before any byte of an answer has
//! reached the client.

use std::time::Duration;

use http::Request;
use hyper::body::Incoming;

use super::unless_lost::unless_lost;
use crate::metrics::{Metrics, ServerLabels};
use crate::upstream::{Balancer, Replayable, RequestBody, Server, Transport, TransportError};

/// What a request is sent with.
pub(super) struct Upstreams<'a> {
    /// The servers and the rule that picks the next one.
    pub balancer: &'a Balancer,
    /// The pooled clients.
    pub transport: &'a Transport,
    /// Where failovers are counted.
    pub metrics: &'a Metrics,
    /// An answer later than this has its server probed at once.
    pub late_answer: Duration,
}

/// What the upstream made of a request, and the server that had the last word.
pub(super) struct Sent<'a> {
    /// The server the last try went to.
    pub server: &'a Server,
    /// Its answer; `None` when that server was found unreachable while the request waited.
    pub answer: Option<Result<http::Response<Incoming>, TransportError>>,
}

/// Sends `request` to `server` and, once more, to the next healthy server when the first
/// could not be connected to (nothing was sent: a write goes on too), or when it failed a
/// read (`reads`: gets, lists and watches may be asked twice). A server that could not be
/// connected to is marked down at once.
pub(super) async fn send<'a>(
    upstreams: &Upstreams<'a>,
    server: &'a Server,
    request: Request<RequestBody>,
    reads: bool,
) -> Sent<'a> {
    // With one server there is no next: the request is not kept for another try.
    if upstreams.balancer.servers().len() < 2 {
        return try_once(upstreams, server, request, reads).await;
    }
    let kept = Replayable::new(request);
    let Some(first) = kept.request() else {
        return Sent {
            server,
            answer: None,
        };
    };
    let sent = try_once(upstreams, server, first, reads).await;
    if !worth_another_try(&sent, reads) {
        return sent;
    }
    let next = upstreams.balancer.pick_except(server);
    let (Some(next), Some(again)) = (next, kept.request()) else {
        return sent;
    };
    let head = kept.head();
    tracing::info!(from = %server.name, to = %next.name, method = %head.method, path = head.uri.path(), "the request goes to the next server");
    let labels = ServerLabels {
        server: server.name.clone(),
    };
    upstreams
        .metrics
        .upstream_failovers
        .get_or_create(&labels)
        .inc();
    try_once(upstreams, next, again, reads).await
}

/// How long a write whose server was found unreachable while it was in flight still waits
/// to learn whether it reached that server: the connect timeout, within which a connect
/// either fails (nothing was sent, so it may go on) or the exchange begins.
const WRITE_GRACE: Duration = crate::upstream::CONNECT_TIMEOUT;

async fn try_once<'a>(
    upstreams: &Upstreams<'_>,
    server: &'a Server,
    request: Request<RequestBody>,
    reads: bool,
) -> Sent<'a> {
    let started = std::time::Instant::now();
    let sending = upstreams.transport.send(&server.url, request);
    tokio::pin!(sending);
    let mut answer = unless_lost(server, upstreams.late_answer, &mut sending).await;
    if answer.is_none() && !reads {
        // The verdict may have come while the connect was still failing: a write that was
        // never sent is worth another server, and only the transport knows.
        answer = tokio::time::timeout(WRITE_GRACE, &mut sending).await.ok();
    }
    // A connect that failed while the server's other connections delivered bytes waited
    // behind them on a slow link: the server is not taken out for it.
    if matches!(answer, Some(Err(TransportError::Connect { .. })))
        && !upstreams.transport.heard_since(&server.url, started)
    {
        server.mark_down();
    }
    Sent { server, answer }
}

/// Whether the request may go to another server: nothing reached the first (a failed
/// connect), or it is a read the first did not answer.
fn worth_another_try(sent: &Sent<'_>, reads: bool) -> bool {
    match &sent.answer {
        Some(Ok(_) | Err(TransportError::Timeout { .. })) => false,
        Some(Err(TransportError::Connect { .. })) => true,
        Some(Err(TransportError::Exchange { .. })) | None => reads,
    }
}

#[cfg(test)]
mod tests;
