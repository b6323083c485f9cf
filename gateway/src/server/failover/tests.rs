use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body::Body as _;
use http_body_util::{BodyExt, Empty, Full};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::upstream::{Credentials, LbMode};

/// What a server did with the requests it got: their heads and bodies, as text.
type Seen = Arc<Mutex<Vec<String>>>;

/// A port nothing listens on: a connect is refused.
async fn dead() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

/// A server that reads each request whole and then, when `answers`, answers `200 live`, or
/// else closes the connection without a word.
async fn serving(answers: bool) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Seen::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let _ = serve(stream, answers, log).await;
            });
        }
    });
    (url, seen)
}

async fn serve(mut stream: TcpStream, answers: bool, seen: Seen) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut byte = [0];
    while !request.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).await?;
        request.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&request).to_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await?;
    request.extend_from_slice(&body);
    seen.lock()
        .unwrap()
        .push(String::from_utf8_lossy(&request).into_owned());
    if answers {
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\nconnection: close\r\n\r\nlive")
            .await?;
    }
    Ok(())
}

struct Bed {
    balancer: Balancer,
    transport: Transport,
    metrics: Metrics,
}

impl Bed {
    fn new(urls: &[&str], mode: LbMode) -> Bed {
        let urls = urls.iter().map(|u| u.parse().unwrap()).collect();
        let balancer = Balancer::new(urls, mode);
        for server in balancer.servers() {
            server.set_healthy(true);
        }
        let credentials = Credentials::anonymous().unwrap();
        Bed {
            balancer,
            transport: Transport::new(credentials, Duration::from_secs(30)),
            metrics: Metrics::new(),
        }
    }

    async fn send(&self, request: Request<RequestBody>, reads: bool) -> (String, Option<String>) {
        let upstreams = Upstreams {
            balancer: &self.balancer,
            transport: &self.transport,
            metrics: &self.metrics,
            late_answer: Duration::from_secs(30),
        };
        let first = self.balancer.pick().unwrap();
        let sent = send(&upstreams, first, request, reads).await;
        let answer = match sent.answer {
            Some(Ok(response)) => {
                let body = response.into_body().collect().await.unwrap().to_bytes();
                Some(String::from_utf8_lossy(&body).into_owned())
            }
            _ => None,
        };
        (sent.server.name.clone(), answer)
    }

    fn failovers_from(&self, index: usize) -> u64 {
        let server = &self.balancer.servers()[index];
        let labels = ServerLabels {
            server: server.name.clone(),
        };
        self.metrics.upstream_failovers.get_or_create(&labels).get()
    }
}

fn post(body: &'static str) -> Request<RequestBody> {
    let body = Full::new(Bytes::from_static(body.as_bytes()))
        .map_err(|never| match never {})
        .boxed_unsync();
    Request::post("/api/v1/namespaces/a/configmaps")
        .header("content-type", "application/json")
        .header(
            "content-length",
            body.size_hint().exact().unwrap().to_string(),
        )
        .body(body)
        .unwrap()
}

fn get() -> Request<RequestBody> {
    let body = Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync();
    Request::get("/api/v1/namespaces/a/configmaps/c")
        .body(body)
        .unwrap()
}

#[tokio::test]
async fn a_write_that_cannot_connect_goes_whole_to_the_next_server_in_every_mode() {
    for mode in [LbMode::Priority, LbMode::Rr] {
        let (live, seen) = serving(true).await;
        let dead = dead().await;
        let bed = Bed::new(&[&dead, &live], mode);
        // Round-robin's first pick is the dead server, as priority's is.
        let (server, answer) = bed.send(post("{\"kind\":\"ConfigMap\"}"), false).await;
        assert_eq!(answer.as_deref(), Some("live"), "{mode:?}");
        assert_eq!(server, live);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "{mode:?}: {seen:?}");
        assert!(seen[0].starts_with("POST /api/v1/namespaces/a/configmaps "));
        assert!(
            seen[0].ends_with("\r\n\r\n{\"kind\":\"ConfigMap\"}"),
            "{}",
            seen[0]
        );
        let dead_server = &bed.balancer.servers()[0];
        assert!(!dead_server.is_healthy(), "{mode:?}: marked down at once");
        assert!(dead_server.take_marked_down(), "the checker is told");
        assert_eq!(bed.failovers_from(0), 1);
    }
}

#[tokio::test]
async fn a_read_the_first_server_hung_up_on_goes_to_the_next() {
    let (silent, _) = serving(false).await;
    let (live, seen) = serving(true).await;
    let bed = Bed::new(&[&silent, &live], LbMode::Priority);
    let (server, answer) = bed.send(get(), true).await;
    assert_eq!((server, answer.as_deref()), (live, Some("live")));
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(bed.failovers_from(0), 1);
    assert!(
        bed.balancer.servers()[0].is_healthy(),
        "it accepted the connection: its probes judge it"
    );
}

#[tokio::test]
async fn a_write_the_first_server_may_have_applied_is_not_sent_again() {
    let (silent, got) = serving(false).await;
    let (live, seen) = serving(true).await;
    let bed = Bed::new(&[&silent, &live], LbMode::Priority);
    let (server, answer) = bed.send(post("{}"), false).await;
    assert_eq!((server, answer), (silent, None), "the exchange failed");
    assert_eq!(
        got.lock().unwrap().len(),
        1,
        "the first server had it whole"
    );
    assert!(seen.lock().unwrap().is_empty(), "never sent twice");
    assert_eq!(bed.failovers_from(0), 0);
}

#[tokio::test]
async fn with_no_other_healthy_server_the_failure_stands() {
    let dead = dead().await;
    let (live, seen) = serving(true).await;
    let bed = Bed::new(&[&dead, &live], LbMode::Priority);
    bed.balancer.servers()[1].set_healthy(false);
    let (server, answer) = bed.send(get(), true).await;
    assert_eq!((server, answer), (dead, None));
    assert!(
        seen.lock().unwrap().is_empty(),
        "an unhealthy server is not tried"
    );
    assert!(!bed.balancer.servers()[0].is_healthy());
}

#[tokio::test]
async fn a_write_whose_server_is_lost_before_its_connect_fails_goes_to_the_next() {
    let (live, seen) = serving(true).await;
    let dead = dead().await;
    let bed = Bed::new(&[&dead, &live], LbMode::Priority);
    let first = &bed.balancer.servers()[0];
    // The health checker's verdict came between the pick and the refused connect.
    first.set_healthy(false);
    let upstreams = Upstreams {
        balancer: &bed.balancer,
        transport: &bed.transport,
        metrics: &bed.metrics,
        late_answer: Duration::from_secs(30),
    };
    let sent = send(&upstreams, first, post("{}"), false).await;
    assert_eq!(sent.server.name, live);
    assert!(matches!(sent.answer, Some(Ok(_))), "answered by the next");
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(bed.failovers_from(0), 1);
}
