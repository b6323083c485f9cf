use std::collections::HashMap;

use http_body_util::BodyExt;

use super::*;
use crate::node::multiplexer::Resource;
use crate::node::multiplexer::object::Object;
use crate::node::multiplexer::state::ListType;

fn multiplexer() -> (Multiplexer, Arc<Shared>) {
    let shared = Arc::new(Shared::new());
    let resource = Resource::parse("v1/services").unwrap();
    let multiplexer = Multiplexer::of(HashMap::from([(resource, shared.clone())]));
    (multiplexer, shared)
}

fn listed(shared: &Shared) {
    let object = Object::parse(bytes::Bytes::from_static(
        br#"{"kind":"Service","apiVersion":"v1","metadata":{"name":"a","namespace":"n","resourceVersion":"5"}}"#,
    ))
    .unwrap();
    let list = ListType {
        kind: "ServiceList".into(),
        api_version: "v1".into(),
    };
    shared.replace(list, vec![object], 10);
}

fn context(uri: &str) -> RequestContext {
    RequestContext::parse(
        &http::Method::GET,
        &uri.parse().unwrap(),
        &http::HeaderMap::new(),
    )
}

fn answers(multiplexer: &Multiplexer, uri: &str, online: bool) -> bool {
    let answer = multiplexer.answer(&context(uri), online, Duration::from_secs(60), None);
    matches!(answer, Answer::Serve(_))
}

#[test]
fn only_lists_and_watches_of_a_listed_pool_scope_resource_are_answered() {
    let (multiplexer, shared) = multiplexer();
    assert!(
        !answers(&multiplexer, "/api/v1/services", true),
        "not listed yet"
    );
    listed(&shared);
    for answered in [
        "/api/v1/services",
        "/api/v1/namespaces/n/services?labelSelector=a%3Db",
        "/api/v1/services?watch=true&resourceVersion=10",
        "/api/v1/services?resourceVersion=0&limit=500",
        "/api/v1/services?fieldSelector=metadata.name%3Da",
    ] {
        assert!(answers(&multiplexer, answered, true), "{answered}");
    }
    for passed in [
        "/api/v1/pods",
        "/api/v1/namespaces/n/services/a",
        "/api/v1/namespaces/n/services/a/status",
        "/api/v1/watch/namespaces/n/services/a",
        "/api/v1/services?continue=abc",
        "/api/v1/services?fieldSelector=spec.clusterIP%3D10.0.0.1",
        "/api/v1/services?labelSelector=%3D%3D%3D",
        "/api/v1/services?resourceVersion=abc",
        "/api/v1/services?watch=true&sendInitialEvents=true",
        "/apis/discovery.k8s.io/v1/endpointslices",
    ] {
        assert!(!answers(&multiplexer, passed, true), "{passed}");
    }
}

#[test]
fn a_list_newer_than_the_state_goes_upstream_online_and_gets_the_state_offline() {
    let (multiplexer, shared) = multiplexer();
    listed(&shared);
    let newer = "/api/v1/services?resourceVersion=11";
    assert!(!answers(&multiplexer, newer, true));
    assert!(answers(&multiplexer, newer, false));
    assert!(answers(
        &multiplexer,
        "/api/v1/services?resourceVersion=9",
        true
    ));
    let exact = "/api/v1/services?resourceVersion=9&resourceVersionMatch=Exact";
    assert!(!answers(&multiplexer, exact, true));
    assert!(!answers(&multiplexer, exact, false));
    let now = "/api/v1/services?resourceVersion=10&resourceVersionMatch=Exact";
    assert!(answers(&multiplexer, now, true));
}

#[tokio::test]
async fn a_watch_older_than_the_window_gets_410_expired() {
    let (multiplexer, shared) = multiplexer();
    listed(&shared);
    let context = context("/api/v1/services?watch=true&resourceVersion=3");
    let Answer::Serve(response) = multiplexer.answer(&context, true, Duration::from_secs(60), None)
    else {
        panic!("a watch of a listed state is answered");
    };
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let event: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");
}
