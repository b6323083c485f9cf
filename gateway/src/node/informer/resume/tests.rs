use crate::cache::StoreWriter;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::sync::mpsc;

use crate::cache::{RedbStore, SetKey, SetMeta, WriteOp};
use crate::filter::Lookup;
use crate::node::informer::{Informers, START_UP_SYNC};

use super::*;

/// Hang guard only: everything here happens on loopback within milliseconds.
const GUARD: Duration = Duration::from_secs(30);

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// A fake apiserver that sends each request's path and query to the test. Lists are empty
/// (NodePools are not in this cluster: 404); a watch of Services from resourceVersion
/// `expired` gets `410 Expired`; other watches stay open with nothing to say.
async fn fake_apiserver(expired: &'static str) -> (SocketAddr, mpsc::UnboundedReceiver<String>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
                let target = request.uri().to_string();
                let _ = tx.send(target.clone());
                async move { Ok::<_, Infallible>(answer(&target, expired)) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    (addr, rx)
}

fn answer(target: &str, expired: &str) -> hyper::Response<Body> {
    let json = |code: u16, body: serde_json::Value| {
        let mut response = hyper::Response::new(Full::new(Bytes::from(body.to_string())).boxed());
        *response.status_mut() = http::StatusCode::from_u16(code).unwrap();
        response
    };
    if target.contains("nodepools") {
        return json(
            404,
            json!({"kind": "Status", "code": 404, "reason": "NotFound"}),
        );
    }
    if !target.contains("watch=true") {
        return json(
            200,
            json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "50"}, "items": []}),
        );
    }
    let from_expired = target
        .split(['?', '&'])
        .any(|param| param == format!("resourceVersion={expired}"));
    if target.contains("/services") && from_expired {
        let event = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
            "status": "Failure", "code": 410, "reason": "Expired", "message": "too old"}});
        return json(200, event);
    }
    let silent = futures_util::stream::pending::<Result<Frame<Bytes>, Infallible>>();
    hyper::Response::new(BodyExt::boxed(StreamBody::new(silent)))
}

/// A store holding the informers' committed list of Services at resourceVersion `version`:
/// `default/web`.
fn persisted_services(dir: &std::path::Path, version: &str) -> Arc<dyn Store> {
    let store = RedbStore::open(dir).unwrap();
    let services = ResourceKey {
        component: COMPONENT.into(),
        resource: "services".into(),
        version: "v1".into(),
        group: String::new(),
    };
    let web = json!({"metadata": {"name": "web", "namespace": "default", "resourceVersion": "40",
        "labels": {"app": "web"}}, "spec": {}});
    let ops = [
        WriteOp::Stage {
            list: 1,
            key: services.object_key("default", "web"),
            object: Bytes::from(web.to_string()),
        },
        WriteOp::Commit {
            list: 1,
            set: SetKey::new(services, "", "", ""),
            meta: SetMeta {
                resource_version: version.into(),
                list_kind: "ServiceList".into(),
                api_version: "v1".into(),
                committed_at: 1,
                items: 1,
                ..SetMeta::default()
            },
        },
    ];
    store.apply(&ops, true).unwrap();
    Arc::new(store)
}

/// The next request for Services the fake apiserver received.
async fn next_services_request(requests: &mut mpsc::UnboundedReceiver<String>) -> String {
    loop {
        let request = tokio::time::timeout(GUARD, requests.recv())
            .await
            .expect("a request in time")
            .expect("the fake apiserver runs");
        if request.contains("/services") {
            return request;
        }
    }
}

#[tokio::test]
async fn informers_resume_from_the_persisted_version_and_serve_lookups_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = persisted_services(dir.path(), "42");
    let (apiserver, mut requests) = fake_apiserver("none").await;
    let informers = Informers::start(apiserver, Some(store)).unwrap();
    tokio::time::timeout(GUARD, informers.synced())
        .await
        .expect("synced from the cache");
    // The apiserver's list would be empty: `web` comes from the cache.
    assert!(
        informers
            .get("", "v1", "services", Some("default"), "web")
            .is_some()
    );
    let first = next_services_request(&mut requests).await;
    assert!(
        first.contains("watch=true") && first.contains("resourceVersion=42"),
        "the first request is a watch from the persisted version, not a list: {first}"
    );
}

#[tokio::test]
async fn a_persisted_version_too_old_to_watch_from_is_listed_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let store = persisted_services(dir.path(), "7");
    let (apiserver, mut requests) = fake_apiserver("7").await;
    let informers = Informers::start(apiserver, Some(store)).unwrap();
    let mut changes = informers.changes();
    let first = next_services_request(&mut requests).await;
    assert!(
        first.contains("watch=true") && first.contains("resourceVersion=7"),
        "{first}"
    );
    let second = next_services_request(&mut requests).await;
    assert!(!second.contains("watch=true"), "then a list: {second}");
    // The list (empty) replaces what the cache had.
    tokio::time::timeout(GUARD, async {
        while informers
            .get("", "v1", "services", Some("default"), "web")
            .is_some()
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the listed state replaces the persisted one");
    // The cache's list came while filtered responses waited for it: nothing had read it.
    // The cloud's list then took `web` away, which is announced.
    let mut announced = Vec::new();
    while let Ok(change) = changes.try_recv() {
        announced.push((change.feed, change.key.as_deref().map(str::to_owned)));
    }
    assert_eq!(announced, [(0, Some("default/web".to_owned()))]);
}

#[tokio::test(start_paused = true)]
async fn filtered_responses_wait_for_the_first_lists_no_longer_than_start_up() {
    // An apiserver that takes connections and never answers: nothing can be listed.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let apiserver = listener.local_addr().unwrap();
    let _silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let informers = Informers::start(apiserver, None).unwrap();
    let wait = informers
        .until_synced()
        .expect("a wait while nothing is listed");
    wait.await;
    assert!(!informers.is_synced());
    assert!(
        tokio::time::Instant::now() >= informers.started + START_UP_SYNC,
        "the wait ends when start-up is over, not before"
    );
    assert!(
        informers.until_synced().is_none(),
        "once start-up is over, responses are filtered without waiting"
    );
}

#[tokio::test]
async fn the_wait_for_the_first_lists_ends_when_they_are_in() {
    let (apiserver, _requests) = fake_apiserver("none").await;
    let informers = Informers::start(apiserver, None).unwrap();
    let wait = informers
        .until_synced()
        .expect("a wait before the first lists");
    tokio::time::timeout(GUARD, wait).await.expect("hang guard");
    assert!(
        informers.is_synced(),
        "the wait ended on the lists, not on start-up's end"
    );
    assert!(informers.until_synced().is_none());
}
