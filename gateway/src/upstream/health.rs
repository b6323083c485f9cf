//! The health checker: probes every apiserver on a heartbeat and turns the results into a
//! healthy/unhealthy verdict with YurtHub's thresholds.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Empty};
use tokio::sync::watch;

use super::balancer::{Balancer, Server};
use super::lease::KubeletLease;
use super::transport::Transport;
use crate::metrics::{Metrics, ServerLabels};

/// The heartbeat knobs (`--heartbeat-*` flags).
#[derive(Clone, Debug)]
pub struct HealthSettings {
    /// Time between two probes of a server whose verdict is settled.
    pub interval: Duration,
    /// How long a probe may take.
    pub timeout: Duration,
    /// Consecutive failures that make a healthy server unhealthy.
    pub failed_retry: u32,
    /// Consecutive successes that make an unhealthy server healthy.
    pub healthy_threshold: u32,
    /// With a node name, a probe renews the node's lease (YurtHub's heartbeat); without, it
    /// asks `/readyz`.
    pub node_name: Option<String>,
    /// kubelet's renewals of that lease, answered by the gateway: the probe renews the lease
    /// only while kubelet does.
    pub kubelet: Arc<KubeletLease>,
    /// The highest resourceVersion the cloud answered a renewal at: the cache's clock of the
    /// cloud, which versions of the node's own offline writes never pass.
    pub cloud_version: Arc<std::sync::atomic::AtomicU64>,
}

/// While a verdict is in doubt (a failure on a healthy server, a success on an unhealthy one)
/// the confirming probes come this close together, so a change is settled within half a
/// second per threshold step rather than a whole interval per step: a node's watches are
/// ended within an interval and a half of the cloud coming back.
const CONFIRM_SPACING: Duration = Duration::from_millis(500);

/// Announces "some server is healthy" and every change of it, to whoever must react
/// (readiness, watches that must end when the cloud comes back).
pub type HealthWatch = watch::Receiver<bool>;

/// Probes all servers once, concurrently, and sets their verdicts from that single result;
/// used at start so readiness is right before the first request.
pub async fn first_verdicts(
    balancer: &Balancer,
    transport: &Transport,
    settings: &HealthSettings,
    metrics: &Metrics,
) {
    let probes = balancer.servers().iter().map(|server| async move {
        let healthy = probe(transport, server, settings, Patience::First).await == Some(true);
        server.set_healthy(healthy);
        metrics
            .upstream_healthy
            .get_or_create(&labels(server))
            .set(i64::from(healthy));
        tracing::info!(server = %server.name, healthy, "initial health");
    });
    futures_util::future::join_all(probes).await;
}

/// Runs the checker for every server until `shutdown` resolves; `any_healthy` receives every
/// change of "some server is healthy".
pub async fn run(
    balancer: Arc<Balancer>,
    transport: Transport,
    settings: HealthSettings,
    metrics: Arc<Metrics>,
    any_healthy: watch::Sender<bool>,
) {
    any_healthy.send_replace(balancer.any_healthy());
    let any_healthy = Arc::new(any_healthy);
    let checkers = (0..balancer.servers().len()).map(|index| {
        check_server(
            balancer.clone(),
            index,
            transport.clone(),
            settings.clone(),
            metrics.clone(),
            any_healthy.clone(),
        )
    });
    futures_util::future::join_all(checkers).await;
}

async fn check_server(
    balancer: Arc<Balancer>,
    index: usize,
    transport: Transport,
    settings: HealthSettings,
    metrics: Arc<Metrics>,
    any_healthy: Arc<watch::Sender<bool>>,
) {
    let server = &balancer.servers()[index];
    let mut verdict = Threshold::new(server.is_healthy(), settings.clone());
    let publish = |healthy: bool, why: &str| {
        metrics
            .upstream_healthy
            .get_or_create(&labels(server))
            .set(i64::from(healthy));
        metrics
            .upstream_health_changes
            .get_or_create(&labels(server))
            .inc();
        if healthy {
            tracing::info!(server = %server.name, "upstream is healthy again");
        } else {
            tracing::warn!(server = %server.name, why, "upstream is unhealthy");
        }
    };
    // What the rest of the gateway follows (open watches end on it) is every server's state,
    // synced after each step: a request that marks the server down between a probe and its
    // verdict changes the server, and no verdict of the checker's then does.
    let sync = || {
        any_healthy.send_if_modified(|any| {
            let now = balancer.any_healthy();
            std::mem::replace(any, now) != now
        });
    };
    // A request that could not connect took the server out already: the verdict follows,
    // and good probes bring it back as after failed ones.
    let adopt_mark = |verdict: &mut Threshold| {
        if server.take_marked_down() && verdict.healthy {
            verdict.mark_down();
            server.set_healthy(false);
            publish(false, "a request could not connect");
        }
    };
    loop {
        let delay = verdict.next_delay();
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            // A request whose answer is late brings the probe forward (at most one probe every
            // CONFIRM_SPACING), so a cut link is found in seconds, not at the next beat.
            () = async {
                tokio::time::sleep(CONFIRM_SPACING.min(delay)).await;
                server.suspected().await;
            } => {}
        }
        adopt_mark(&mut verdict);
        sync();
        let started = std::time::Instant::now();
        let ok = match probe(&transport, server, &settings, Patience::Beat).await {
            Some(ok) => ok,
            // Its connections delivered bytes while the probe waited: the probe queued
            // behind them on a slow link, and the server is not found gone for that. Asked
            // since the probe began, which a look made late (a loaded node) cannot miss.
            None if transport.heard_since(&server.url, started) => {
                tracing::debug!(server = %server.name, "probe timed out while the server's data kept arriving: no verdict");
                adopt_mark(&mut verdict);
                sync();
                continue;
            }
            None => false,
        };
        adopt_mark(&mut verdict);
        let before = verdict.healthy;
        if let Some(healthy) = verdict.observe(ok) {
            // Published when the server or the verdict turns: a request may have taken the
            // server out since the mark was last adopted.
            if server.set_healthy(healthy) || healthy != before {
                publish(healthy, "its probes failed");
            }
        }
        sync();
    }
}

/// How long a probe waits for its answer.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Patience {
    /// The heartbeat timeout, stretched to the server's round trip.
    Beat,
    /// The gateway's first probe of the server, with no round trip known yet: the heartbeat
    /// timeout, and up to the interval for an answer under way (the server's bytes are
    /// arriving). Over a thin link the first connection's TLS handshake and renewal take
    /// longer than the timeout, and a gateway that gave up there would start offline; a
    /// black-holed or refused link still gets its verdict within the timeout.
    First,
}

/// One probe within the heartbeat timeout (see [`Patience`]): the node-lease renewal, or
/// `GET /readyz`; `None` when it timed out.
async fn probe(
    transport: &Transport,
    server: &Server,
    settings: &HealthSettings,
    patience: Patience,
) -> Option<bool> {
    let probe = async {
        match &settings.node_name {
            Some(node) => {
                let kubelet_alive = settings.kubelet.alive();
                let seen = &settings.cloud_version;
                super::lease::renew(transport, &server.url, node, kubelet_alive, seen).await
            }
            None => readyz(transport, server).await,
        }
    };
    let mut probe = std::pin::pin!(probe);
    // Past the heartbeat timeout as far as the server's round trip asks (a thin link's
    // queue), never past the interval.
    let limit = transport.probe_timeout(&server.url, settings.timeout, settings.interval);
    let started = tokio::time::Instant::now();
    let mut answer = tokio::time::timeout(limit, &mut probe).await.ok();
    if answer.is_none()
        && patience == Patience::First
        && transport.heard_since(&server.url, started.into_std())
    {
        tracing::info!(server = %server.name, ?limit, "first probe under way past the timeout: the link is slow; waiting up to the interval");
        let rest = settings.interval.saturating_sub(started.elapsed());
        answer = tokio::time::timeout(rest, &mut probe).await.ok();
    }
    if answer.is_some() {
        transport.answered_in(&server.url, started.elapsed());
    }
    answer
}

/// `GET /readyz` on the gateway's identity; healthy on a 2xx.
async fn readyz(transport: &Transport, server: &Server) -> bool {
    let request = Request::builder().method(Method::GET).uri("/readyz").body(
        Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    let Ok(request) = request else { return false };
    let exchange = async {
        let response = transport.send(&server.url, request).await.ok()?;
        let ok = response.status().is_success();
        // Drain the short body so the connection returns to the pool.
        response.into_body().collect().await.ok()?;
        Some(ok)
    };
    exchange.await == Some(true)
}

/// Takes `balancer`'s servers out of the health series, once they are no longer checked (a
/// pool's replaced leaders), so that no stale verdict of a server gone stays on show.
pub fn forget(balancer: &Balancer, metrics: &Metrics) {
    for server in balancer.servers() {
        metrics.upstream_healthy.remove(&labels(server));
    }
}

fn labels(server: &Server) -> ServerLabels {
    ServerLabels {
        server: server.name.clone(),
    }
}

/// The threshold logic, apart from I/O so it can be tested step by step.
#[derive(Debug)]
struct Threshold {
    healthy: bool,
    /// Consecutive probe results that disagree with `healthy`.
    streak: u32,
    settings: HealthSettings,
}

impl Threshold {
    fn new(healthy: bool, settings: HealthSettings) -> Threshold {
        Threshold {
            healthy,
            streak: 0,
            settings,
        }
    }

    fn next_delay(&self) -> Duration {
        if self.streak > 0 {
            CONFIRM_SPACING.min(self.settings.interval)
        } else {
            self.settings.interval
        }
    }

    /// Turns the verdict unhealthy at once, as a request that could not connect found it.
    fn mark_down(&mut self) {
        self.healthy = false;
        self.streak = 0;
    }

    /// Takes one probe result; returns the verdict once it is settled (changed or not).
    fn observe(&mut self, ok: bool) -> Option<bool> {
        if ok == self.healthy {
            self.streak = 0;
            return Some(self.healthy);
        }
        self.streak += 1;
        let needed = if self.healthy {
            self.settings.failed_retry
        } else {
            self.settings.healthy_threshold
        };
        if self.streak >= needed {
            self.healthy = ok;
            self.streak = 0;
            return Some(self.healthy);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::upstream::{Credentials, LbMode};

    fn settings() -> HealthSettings {
        HealthSettings {
            interval: Duration::from_secs(10),
            timeout: Duration::from_secs(2),
            failed_retry: 3,
            healthy_threshold: 2,
            node_name: None,
            kubelet: Arc::default(),
            cloud_version: Arc::default(),
        }
    }

    #[test]
    fn healthy_turns_unhealthy_after_failed_retry_failures() {
        let mut v = Threshold::new(true, settings());
        assert_eq!(v.observe(false), None);
        assert_eq!(v.next_delay(), CONFIRM_SPACING);
        assert_eq!(v.observe(false), None);
        assert_eq!(v.observe(false), Some(false));
        assert_eq!(v.next_delay(), Duration::from_secs(10));
    }

    #[test]
    fn a_success_resets_the_failure_streak() {
        let mut v = Threshold::new(true, settings());
        v.observe(false);
        v.observe(false);
        assert_eq!(v.observe(true), Some(true));
        assert_eq!(v.observe(false), None);
        assert_eq!(v.observe(false), None);
        assert_eq!(v.observe(false), Some(false));
    }

    #[test]
    fn a_server_marked_down_needs_the_threshold_to_return() {
        let mut v = Threshold::new(true, settings());
        v.observe(false);
        v.mark_down();
        assert_eq!(
            v.next_delay(),
            Duration::from_secs(10),
            "settled, not in doubt"
        );
        assert_eq!(v.observe(true), None, "one good probe is not enough");
        assert_eq!(v.observe(true), Some(true));
    }

    #[test]
    fn unhealthy_turns_healthy_after_the_threshold() {
        let mut v = Threshold::new(false, settings());
        assert_eq!(v.observe(true), None);
        assert_eq!(v.next_delay(), CONFIRM_SPACING);
        assert_eq!(v.observe(true), Some(true));
    }

    /// A server that reads each request's head and answers `/readyz` with its head at once
    /// and its body `body_after` later, or, with no `body_after`, never answers at all.
    async fn readyz_server(body_after: Option<Duration>) -> Balancer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0];
                    while !head.ends_with(b"\r\n\r\n") {
                        if stream.read_exact(&mut byte).await.is_err() {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let Some(after) = body_after else {
                        let _ = stream.read(&mut byte).await;
                        return;
                    };
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n";
                    let _ = stream.write_all(answer).await;
                    tokio::time::sleep(after).await;
                    let _ = stream.write_all(b"ok").await;
                    let _ = stream.read(&mut byte).await;
                });
            }
        });
        Balancer::new(vec![url.parse().unwrap()], LbMode::Rr)
    }

    #[tokio::test]
    async fn a_first_probe_whose_answer_is_under_way_waits_past_the_timeout_and_no_other_does() {
        let settings = HealthSettings {
            timeout: Duration::from_secs(5),
            interval: Duration::from_secs(60),
            ..settings()
        };
        let transport = Transport::new(Credentials::anonymous().unwrap(), Duration::from_secs(60));
        let slow = readyz_server(Some(Duration::from_secs(10))).await;
        let silent = readyz_server(None).await;
        let (first, beat, silent_first) = tokio::join!(
            probe(&transport, &slow.servers()[0], &settings, Patience::First),
            probe(&transport, &slow.servers()[0], &settings, Patience::Beat),
            probe(&transport, &silent.servers()[0], &settings, Patience::First),
        );
        assert_eq!(first, Some(true), "the first probe waited for its answer");
        assert_eq!(beat, None, "a beat's probe keeps the timeout");
        assert_eq!(
            silent_first, None,
            "a link that says nothing gets the timeout"
        );
    }
}
