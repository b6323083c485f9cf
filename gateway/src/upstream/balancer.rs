//! Which apiserver a request goes to: round-robin or priority over the healthy servers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use http::Uri;
use tokio::sync::Notify;

use super::lb_mode::LbMode;

/// One upstream apiserver and its health as the checker last saw it.
#[derive(Debug)]
pub struct Server {
    /// The server's base URL (scheme and authority).
    pub url: Uri,
    /// The URL as the operator wrote it, for logs and metric labels.
    pub name: String,
    healthy: AtomicBool,
    /// Set by a request that could not connect, until the health checker adopts it.
    marked_down: AtomicBool,
    /// Woken when the server turns unhealthy: requests in flight to it stop waiting.
    lost: Notify,
    /// Woken by a request whose answer is late: the checker probes now, not at its next beat.
    suspect: Notify,
}

impl Server {
    fn new(url: Uri) -> Server {
        Server {
            name: url.to_string().trim_end_matches('/').to_owned(),
            url,
            healthy: AtomicBool::new(false),
            marked_down: AtomicBool::new(false),
            lost: Notify::new(),
            suspect: Notify::new(),
        }
    }

    /// Whether the last health verdict was good.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// Records a health verdict; returns whether it changed.
    pub(crate) fn set_healthy(&self, healthy: bool) -> bool {
        let changed = self.healthy.swap(healthy, Ordering::AcqRel) != healthy;
        if changed && !healthy {
            self.lost.notify_waiters();
        }
        changed
    }

    /// Resolves once the server is unhealthy (at once if it is).
    pub async fn lost(&self) {
        let lost = self.lost.notified();
        tokio::pin!(lost);
        // Registered before the check, so a verdict between the two is not missed.
        lost.as_mut().enable();
        if self.is_healthy() {
            lost.await;
        }
    }

    /// Asks the health checker to probe the server now: an answer from it is late.
    pub fn suspect(&self) {
        self.suspect.notify_one();
    }

    /// Takes the server out of the rotation at once: a request could not connect to it. The
    /// health checker adopts the verdict at its next probe, and brings the server back after
    /// its threshold of good probes.
    pub fn mark_down(&self) {
        self.marked_down.store(true, Ordering::Release);
        self.set_healthy(false);
        self.suspect.notify_one();
    }

    /// Whether a request marked the server down since the last call.
    pub(crate) fn take_marked_down(&self) -> bool {
        self.marked_down.swap(false, Ordering::AcqRel)
    }

    /// Resolves when a request has suspected the server since the last call.
    pub(crate) async fn suspected(&self) {
        self.suspect.notified().await;
    }
}

/// The servers and the rule that picks one.
#[derive(Debug)]
pub struct Balancer {
    servers: Vec<Server>,
    mode: LbMode,
    next: AtomicUsize,
}

impl Balancer {
    /// A balancer over `urls`; every server starts unhealthy until the checker has seen it.
    pub fn new(urls: Vec<Uri>, mode: LbMode) -> Balancer {
        let servers = urls.into_iter().map(Server::new).collect();
        Balancer {
            servers,
            mode,
            next: AtomicUsize::new(0),
        }
    }

    /// All servers, in the order given.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// Whether any server is healthy.
    pub fn any_healthy(&self) -> bool {
        self.servers.iter().any(Server::is_healthy)
    }

    /// A healthy server by the balancing rule, or `None` when none is healthy.
    pub fn pick(&self) -> Option<&Server> {
        match self.mode {
            LbMode::Priority => self.servers.iter().find(|s| s.is_healthy()),
            LbMode::Rr => {
                let n = self.servers.len();
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                (0..n)
                    .map(|i| &self.servers[(start + i) % n])
                    .find(|s| s.is_healthy())
            }
        }
    }

    /// A healthy server other than `failed` by the balancing rule: where a request goes when
    /// `failed` could not answer it.
    pub fn pick_except(&self, failed: &Server) -> Option<&Server> {
        let others = || self.servers.iter().filter(|s| !std::ptr::eq(*s, failed));
        match self.mode {
            LbMode::Priority => others().find(|s| s.is_healthy()),
            LbMode::Rr => {
                let n = self.servers.len();
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                (0..n)
                    .map(|i| &self.servers[(start + i) % n])
                    .find(|s| !std::ptr::eq(*s, failed) && s.is_healthy())
            }
        }
    }

    /// A server by the balancing rule ignoring health: for when none is known healthy but a
    /// request should still be tried rather than refused.
    pub fn pick_any(&self) -> Option<&Server> {
        match self.mode {
            LbMode::Priority => self.servers.first(),
            LbMode::Rr => {
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                self.servers.get(start % self.servers.len().max(1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::future::Future;

    #[tokio::test]
    async fn lost_resolves_when_the_server_turns_unhealthy() {
        let server = Server::new("https://a:6443".parse().unwrap());
        server.lost().await;
        server.set_healthy(true);
        let lost = server.lost();
        tokio::pin!(lost);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(
            lost.as_mut().poll(&mut cx).is_pending(),
            "a healthy server is not lost"
        );
        server.set_healthy(false);
        assert!(lost.as_mut().poll(&mut cx).is_ready());
    }

    fn balancer(mode: LbMode) -> Balancer {
        let urls = ["https://a:6443", "https://b:6443", "https://c:6443"]
            .map(|u| u.parse().unwrap())
            .to_vec();
        Balancer::new(urls, mode)
    }

    fn names<'a>(picks: impl Iterator<Item = Option<&'a Server>>) -> Vec<&'a str> {
        picks.map(|s| s.map_or("-", |s| s.name.as_str())).collect()
    }

    #[test]
    fn round_robin_skips_unhealthy_servers() {
        let b = balancer(LbMode::Rr);
        assert!(b.pick().is_none());
        for s in b.servers() {
            s.set_healthy(true);
        }
        b.servers()[1].set_healthy(false);
        // The refused pick above took turn 0; turns 1..=4 start at b, c, a, b.
        let picks = names((0..4).map(|_| b.pick()));
        assert_eq!(
            picks,
            [
                "https://c:6443",
                "https://c:6443",
                "https://a:6443",
                "https://c:6443"
            ]
        );
    }

    #[test]
    fn priority_takes_the_first_healthy_server() {
        let b = balancer(LbMode::Priority);
        b.servers()[1].set_healthy(true);
        b.servers()[2].set_healthy(true);
        assert_eq!(b.pick().unwrap().name, "https://b:6443");
        b.servers()[0].set_healthy(true);
        assert_eq!(b.pick().unwrap().name, "https://a:6443");
        assert_eq!(b.pick_any().unwrap().name, "https://a:6443");
    }

    #[test]
    fn a_failed_server_is_skipped_in_every_mode() {
        for mode in [LbMode::Rr, LbMode::Priority] {
            let b = balancer(mode);
            for s in b.servers() {
                s.set_healthy(true);
            }
            let failed = &b.servers()[0];
            let others = names((0..4).map(|_| b.pick_except(failed)));
            assert!(!others.contains(&"https://a:6443"), "{mode:?}: {others:?}");
            assert!(!others.contains(&"-"), "{mode:?}: {others:?}");
            b.servers()[1].set_healthy(false);
            b.servers()[2].set_healthy(false);
            assert!(
                b.pick_except(failed).is_none(),
                "{mode:?}: no other is healthy"
            );
        }
    }

    #[test]
    fn marking_down_is_at_once_and_is_reported_to_the_checker_once() {
        let b = balancer(LbMode::Rr);
        let server = &b.servers()[0];
        server.set_healthy(true);
        server.mark_down();
        assert!(!server.is_healthy(), "out of the rotation at once");
        assert!(server.take_marked_down());
        assert!(!server.take_marked_down());
    }

    #[test]
    fn set_healthy_reports_changes_only() {
        let b = balancer(LbMode::Rr);
        assert!(b.servers()[0].set_healthy(true));
        assert!(!b.servers()[0].set_healthy(true));
        assert!(b.servers()[0].set_healthy(false));
    }
}
