//! Who may ask the hub what: the probes' endpoints answer anyone who reaches the hub's
//! address (kubelet probes it over the node's address when `--bind-address` is not
//! loopback); everything else — the cache's contents, the filter chain, and any endpoint
//! added later (`/v1/token`) — answers only callers on loopback, whatever address the hub
//! is bound to. Open endpoints are listed, so a new one is closed until it is listed here.

use std::net::SocketAddr;

use super::error::HubError;

/// The endpoints any caller may ask: what kubelet's probes and Prometheus scrape.
const OPEN: [&str; 3] = ["/v1/healthz", "/v1/readyz", "/metrics"];

/// `Some(refusal)` (a `403`) when `peer` may not ask for `path`.
pub(super) fn refused(peer: SocketAddr, path: &str) -> Option<HubError> {
    // A v4 caller of a dual-stack listener arrives as `::ffff:a.b.c.d`.
    if OPEN.contains(&path) || peer.ip().to_canonical().is_loopback() {
        return None;
    }
    tracing::debug!(%peer, path, "hub endpoint refused to a caller off loopback");
    Some(HubError::OffLoopback(path.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refusal::Refusal;
    use http::StatusCode;
    use http_body_util::BodyExt;

    fn peer(ip: &str) -> SocketAddr {
        SocketAddr::new(ip.parse().expect("an address"), 40000)
    }

    #[test]
    fn probes_answer_anyone() {
        for path in OPEN {
            for ip in ["198.18.0.2", "10.0.0.7", "fe80::1", "127.0.0.1"] {
                assert!(refused(peer(ip), path).is_none(), "{path} from {ip}");
            }
        }
    }

    #[test]
    fn everything_else_answers_only_loopback() {
        for path in [
            "/v1/cache",
            "/v1/cache/object",
            "/v1/token",
            "/v1/filters",
            "/debug/pprof/",
            "/v1/healthz/../cache",
        ] {
            for ip in ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"] {
                assert!(refused(peer(ip), path).is_none(), "{path} from {ip}");
            }
            for ip in [
                "198.18.0.2",
                "169.254.2.1",
                "::ffff:198.18.0.2",
                "2001:db8::1",
            ] {
                let refusal = refused(peer(ip), path);
                assert_eq!(
                    refusal.map(|r| r.refusal_status().code),
                    Some(StatusCode::FORBIDDEN),
                    "{path} from {ip}"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_refusal_is_a_kubernetes_status() {
        let refusal = refused(peer("198.18.0.2"), "/v1/cache/object").expect("refused");
        let metrics = crate::metrics::Metrics::new();
        let response = crate::refusal::refuse(&refusal, &metrics);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 403);
        assert_eq!(status["reason"], "Forbidden");
    }
}
