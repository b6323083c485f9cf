//! The local proxy's offline answer to a write with an arbitrary body: a create echoed with
//! 201, kubelet's lease renewal with 200, in the content type the body came in. The input
//! is a byte of choices (create or renewal, which path, which `Content-Type`), four bytes
//! seeding the body's chunking, and the body. Invariants: the answer does not depend on the
//! chunking; an answer echoes the body byte for byte, in its media type (JSON: an object
//! serde_json reads; protobuf: the `k8s\0` envelope); a JSON object body with no
//! subresource is always answered; a refusal is a 4xx or 5xx with the right reason.
#![no_main]

use bytes::Bytes;
use edgegate::fuzzing::offline_write;
use edgegate::local::LocalError;
use edgegate::refusal::Refusal;
use edgegate::request::RequestContext;
use edgegate_fuzz::{chunks, read_body, runtime, seed_and_body, upstream};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, Method, Request, Uri};
use libfuzzer_sys::fuzz_target;

const PATHS: [&str; 4] = [
    "/api/v1/namespaces/default/events",
    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
    "/api/v1/namespaces/default/serviceaccounts/sa/token",
    "/api/v1/nodes/edge-1/status",
];

/// `Content-Type` values: none, JSON and protobuf however spelled, and others.
const MEDIA: [Option<&str>; 8] = [
    None,
    Some("application/json"),
    Some("Application/JSON; charset=utf-8"),
    Some("application/vnd.kubernetes.protobuf"),
    Some(" application/vnd.kubernetes.protobuf ;q=1"),
    Some("application/yaml"),
    Some(""),
    Some("application/json-patch+json"),
];

#[derive(Debug, PartialEq)]
enum Answer {
    Echoed(u16, Option<String>, Bytes),
    Refused(u16, String),
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let Some((seed, body)) = seed_and_body(rest) else {
        return;
    };
    let create = choice & 1 == 0;
    let path = PATHS[usize::from(choice >> 1) % PATHS.len()];
    let media = MEDIA[usize::from(choice >> 3) % MEDIA.len()];
    let whole = answer(create, path, media, &[body]);
    assert_eq!(
        whole,
        answer(create, path, media, &chunks(body, seed)),
        "a chunking changed the answer"
    );

    let context = RequestContext::parse(&Method::POST, &Uri::from_static(path), &HeaderMap::new());
    let json = media.is_none_or(|m| {
        m.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .eq_ignore_ascii_case("application/json")
    });
    let protobuf = media.is_some_and(|m| {
        m.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .eq_ignore_ascii_case("application/vnd.kubernetes.protobuf")
    });
    let is_object = serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| v.is_object());
    match &whole {
        Answer::Echoed(code, content_type, echoed) => {
            assert_eq!(*code, if create { 201 } else { 200 });
            assert_eq!(echoed, body, "the echo is not the body");
            let content_type = content_type.as_deref();
            if json {
                assert_eq!(content_type, Some("application/json"));
                assert!(is_object, "echoed JSON that is not an object");
            } else {
                assert!(protobuf, "echoed a body of type {media:?}");
                assert_eq!(content_type, Some("application/vnd.kubernetes.protobuf"));
                assert!(body.starts_with(b"k8s\0") && body.len() > 4);
            }
            if create {
                assert!(context.info.subresource.is_empty(), "created a subresource");
            }
        }
        Answer::Refused(code, _) => {
            assert!((400..600).contains(code), "refused with {code}");
            assert!(
                !(json && is_object && (!create || context.info.subresource.is_empty())),
                "refused a JSON object: {whole:?}"
            );
        }
    }
});

fn answer(create: bool, path: &str, media: Option<&str>, pieces: &[&[u8]]) -> Answer {
    let mut request = Request::builder().method(if create { Method::POST } else { Method::PUT });
    if let Some(media) = media {
        request = request.header(CONTENT_TYPE, media);
    }
    let request = request.uri(path).body(upstream(pieces)).expect("a request");
    let context = RequestContext::parse(request.method(), request.uri(), request.headers());
    runtime().block_on(async {
        match offline_write(&context, request, create).await {
            Ok(response) => {
                let code = response.status().as_u16();
                let content_type = response
                    .headers()
                    .get(CONTENT_TYPE)
                    .map(|v| v.to_str().expect("an ASCII content type").to_owned());
                let body = read_body(response.into_body())
                    .await
                    .expect("an echo reads");
                Answer::Echoed(code, content_type, body)
            }
            Err(error) => refused(&error),
        }
    })
}

fn refused(error: &LocalError) -> Answer {
    let status = error.refusal_status();
    Answer::Refused(status.code.as_u16(), error.to_string())
}
