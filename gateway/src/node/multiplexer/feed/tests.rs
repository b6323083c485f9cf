use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::{StreamExt, stream};
use http::Response;
use http_body_util::StreamBody;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Frame;

use super::*;
use crate::node::multiplexer::state::Waited;

/// A service's name and version as a list item.
fn item(name: &str, version: u32) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"default","resourceVersion":"{version}"}}}}"#
    )
}

/// A list page's JSON: its items and its `continue` token (none on the last page).
fn page(items: &[String], continued: &str) -> String {
    format!(
        r#"{{"kind":"ServiceList","apiVersion":"v1","metadata":{{"resourceVersion":"7","continue":"{continued}"}},"items":[{}]}}"#,
        items.join(",")
    )
}

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// A body that sends `data`, then ends cleanly or breaks off.
fn body(data: String, breaks: bool) -> Body {
    let mut frames = vec![Ok(Frame::data(Bytes::from(data)))];
    if breaks {
        frames.push(Err(std::io::Error::other("connection reset")));
    }
    UnsyncBoxBody::new(StreamBody::new(stream::iter(frames)))
}

/// kube-apiserver's pages of three Services, of which the second page, asked for whole,
/// breaks off after its first item, as a thin link's list does when the apiserver gives up
/// on it; the queries it was asked.
#[derive(Clone, Default)]
struct Apiserver {
    asked: Arc<Mutex<Vec<String>>>,
    /// How its first requests are refused (`404`: as the gateway does offline for a list
    /// its cache has nothing of).
    refused: Vec<StatusCode>,
    /// Whether the second page, asked for whole, stalls after its first item instead of
    /// breaking off.
    stalls: bool,
}

impl tower_service::Service<http::Request<kube::client::Body>> for Apiserver {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let query = request.uri().query().unwrap_or_default().to_owned();
        let mut asked = self.asked.lock().expect("not poisoned");
        asked.push(query.clone());
        if let Some(status) = self.refused.get(asked.len() - 1) {
            let mut answer = Response::new(body(String::new(), false));
            *answer.status_mut() = *status;
            return Box::pin(async move { Ok(answer) });
        }
        drop(asked);
        let (a, b, c) = (item("a", 5), item("b", 6), item("c", 7));
        let answer = match query.as_str() {
            "limit=500" => body(page(&[a], "one"), false),
            "limit=500&continue=one" if self.stalls => {
                let begun = stream::iter([Ok(Frame::data(Bytes::from(
                    page(&[b, c], "")[..100].to_owned(),
                )))]);
                UnsyncBoxBody::new(StreamBody::new(begun.chain(stream::pending())))
            }
            "limit=500&continue=one" => body(page(&[b, c], "")[..100].to_owned(), true),
            "limit=250&continue=one" => body(page(&[b, c], ""), false),
            _ => body(String::new(), false),
        };
        Box::pin(async move { Ok(Response::new(answer)) })
    }
}

/// A feed of Services from `apiserver`, the cloud up or not.
fn feed(apiserver: &Apiserver, shared: &Arc<Shared>, cloud_up: bool) -> Feed {
    Feed {
        client: kube::Client::new(apiserver.clone(), "default"),
        resource: Resource::parse("v1/services").expect("a resource"),
        shared: shared.clone(),
        metrics: MultiplexerMetrics::default(),
        sources: tokio::sync::watch::channel(1).1,
        cloud: tokio::sync::watch::channel(cloud_up).1,
    }
}

#[tokio::test(start_paused = true)]
async fn a_page_that_breaks_off_is_asked_again_from_its_token_and_the_clients_wait() {
    let apiserver = Apiserver::default();
    let shared = Arc::new(Shared::new());
    let feed = feed(&apiserver, &shared, true);
    // A client of the state waits for the first list in windows shorter than the pause
    // before the page is asked again.
    let waited = shared.first_list(Duration::from_millis(100));
    let waiting = {
        let shared = shared.clone();
        tokio::spawn(async move {
            waited.await;
            shared.version()
        })
    };

    feed.list().await.expect("the list ends whole");

    assert_eq!(
        *apiserver.asked.lock().expect("not poisoned"),
        [
            "limit=500",
            "limit=500&continue=one",
            "limit=250&continue=one"
        ],
        "only the page that broke off is asked again, half as large"
    );
    let (objects, version) = shared.snapshot("");
    let names: Vec<&str> = objects.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(
        (names, version),
        (vec!["default/a", "default/b", "default/c"], 7)
    );
    assert_eq!(
        waiting.await.expect("the client's task"),
        Some(7),
        "the client waited through the pause for the list"
    );
}

#[test]
fn a_page_refused_or_its_token_expired_is_not_asked_again() {
    for status in [StatusCode::GONE, StatusCode::FORBIDDEN] {
        assert!(!may_mend(&FeedError::Status(status)), "{status}");
    }
    for status in [StatusCode::GATEWAY_TIMEOUT, StatusCode::TOO_MANY_REQUESTS] {
        assert!(may_mend(&FeedError::Status(status)), "{status}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_404_while_the_cloud_is_away_is_not_taken_for_a_resource_not_served() {
    let apiserver = Apiserver {
        refused: vec![StatusCode::NOT_FOUND],
        ..Apiserver::default()
    };
    let shared = Arc::new(Shared::new());
    let running = tokio::spawn(feed(&apiserver, &shared, false).run(None));
    let mut versions = shared.versions();
    // A resource not served is asked for again after 5 minutes; a failure within seconds.
    let listed = versions.wait_for(Option::is_some);
    let listed = tokio::time::timeout(Duration::from_secs(60), listed).await;
    running.abort();
    assert!(
        listed.is_ok(),
        "asked {:?}",
        apiserver.asked.lock().expect("not poisoned")
    );
}

#[tokio::test(start_paused = true)]
async fn a_page_that_stalls_is_asked_again_before_its_clients_stop_waiting() {
    let apiserver = Apiserver {
        stalls: true,
        ..Apiserver::default()
    };
    let shared = Arc::new(Shared::new());
    let feed = feed(&apiserver, &shared, true);
    let waited = shared.first_list(Duration::from_secs(3));
    let waiting = tokio::spawn(waited);

    let listed = tokio::time::timeout(Duration::from_secs(120), feed.list()).await;
    listed
        .expect("the stall ends")
        .expect("the list ends whole");

    assert_eq!(
        apiserver.asked.lock().expect("not poisoned")[1..],
        ["limit=500&continue=one", "limit=250&continue=one"],
        "the stalled page is asked again"
    );
    assert_eq!(waiting.await.expect("the client's task"), Waited::Listed);
}

#[tokio::test(start_paused = true)]
async fn a_first_list_that_failed_in_a_way_that_may_mend_is_waited_for_through_the_pause() {
    // Every try of the first page unavailable: the list fails, and is listed again after a
    // pause.
    let apiserver = Apiserver {
        refused: vec![StatusCode::SERVICE_UNAVAILABLE; PAGE_TRIES as usize],
        ..Apiserver::default()
    };
    let shared = Arc::new(Shared::new());
    let waited = shared.first_list(Duration::from_millis(100));
    let running = tokio::spawn(feed(&apiserver, &shared, true).run(None));
    let waited = waited.await;
    running.abort();
    assert_eq!(waited, Waited::Listed);
}

#[tokio::test(start_paused = true)]
async fn the_first_list_waits_for_the_cloud_to_be_taken_for_up_and_so_do_its_clients() {
    let apiserver = Apiserver::default();
    let shared = Arc::new(Shared::new());
    // The gateway's first probe timed out over a thin link: the cloud is taken for away.
    let (cloud, cloud_up) = tokio::sync::watch::channel(false);
    let feed = Feed {
        cloud: cloud_up,
        ..feed(&apiserver, &shared, false)
    };
    let running = tokio::spawn(feed.run(None));
    let waiting = tokio::spawn(shared.first_list(Duration::from_secs(3)));
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert!(
        apiserver.asked.lock().expect("not poisoned").is_empty(),
        "not listed from the gateway's empty cache"
    );
    cloud.send_replace(true);
    let waited = waiting.await.expect("the client's task");
    running.abort();
    assert_eq!(waited, Waited::Listed);
}
