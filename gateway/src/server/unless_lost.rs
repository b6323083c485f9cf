//! Waiting for an upstream answer no longer than its server is believed reachable.

use std::future::Future;
use std::time::Duration;

use crate::upstream::Server;

/// The upstream's answer to `send`, or `None` once `server` is found unhealthy first. An
/// answer later than `late` makes the health checker probe the server at once.
pub async fn unless_lost<T>(
    server: &Server,
    late: Duration,
    send: impl Future<Output = T>,
) -> Option<T> {
    let lost = async {
        let late_notice = async {
            tokio::time::sleep(late).await;
            server.suspect();
            std::future::pending::<()>().await
        };
        tokio::select! {
            () = server.lost() => {}
            () = late_notice => {}
        }
    };
    tokio::select! {
        biased;
        answer = send => Some(answer),
        () = lost => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::{Balancer, LbMode};

    fn balancer() -> Balancer {
        let balancer = Balancer::new(vec!["https://a:6443".parse().unwrap()], LbMode::Rr);
        balancer.servers()[0].set_healthy(true);
        balancer
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_answer_has_the_server_probed_and_its_loss_ends_the_wait() {
        let balancer = balancer();
        let server = &balancer.servers()[0];
        let late = Duration::from_secs(2);
        let waiting = unless_lost(server, late, std::future::pending::<()>());
        tokio::pin!(waiting);
        let probed = async {
            // The checker's side: a suspicion comes once the answer is late, not before.
            let suspected = tokio::time::timeout(late / 2, server.suspected()).await;
            assert!(suspected.is_err(), "suspected before the answer was late");
            server.suspected().await;
            server.set_healthy(false);
        };
        let (answer, ()) = tokio::join!(&mut waiting, probed);
        assert_eq!(answer, None, "the wait ends with the server's loss");
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_that_comes_is_taken_even_late() {
        let balancer = balancer();
        let server = &balancer.servers()[0];
        let answer = unless_lost(server, Duration::from_secs(2), async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            7
        })
        .await;
        assert_eq!(answer, Some(7));
    }
}
