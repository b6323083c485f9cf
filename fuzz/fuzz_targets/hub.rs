//! The hub server's endpoints, asked anything: an arbitrary method, target and body, from
//! loopback or not. The gateway behind it is empty but for a cache holding one Secret and
//! one ConfigMap. The input is a byte of choices (method, peer), then the target up to the
//! first newline, then the body. Invariants: a caller off loopback gets only the probes'
//! endpoints (anything else is 403); every answer the hub makes of a failure is a `Status`
//! serde_json reads, with the response's code; `/v1/cache/object` shows a Secret with its
//! values redacted; and no answer ever holds the cached Secret's value.
#![no_main]

use std::net::SocketAddr;

use bytes::Bytes;
use edgegate::fuzzing::{HubFixture, SECRET_VALUE};
use edgegate_fuzz::{read_body, runtime};
use http::header::CONTENT_TYPE;
use http::{Method, Request, Uri};
use http_body_util::Full;
use libfuzzer_sys::fuzz_target;

const METHODS: [Method; 6] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::OPTIONS,
];

const OPEN: [&str; 3] = ["/v1/healthz", "/v1/readyz", "/metrics"];

fn hub() -> &'static HubFixture {
    static HUB: std::sync::OnceLock<(HubFixture, std::path::PathBuf)> = std::sync::OnceLock::new();
    &HUB.get_or_init(|| {
        let scratch =
            std::env::temp_dir().join(format!("edgegate-fuzz-hub-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("a scratch directory");
        let hub = runtime()
            .block_on(HubFixture::start(&scratch))
            .expect("the hub starts");
        (hub, scratch)
    })
    .0
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let method = METHODS[usize::from(choice) % METHODS.len()].clone();
    let peer: SocketAddr = if choice & 0x80 == 0 {
        "127.0.0.1:40000".parse().expect("an address")
    } else {
        "192.0.2.7:40000".parse().expect("an address")
    };
    let (target, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    // hyper hands on only targets it parsed.
    let Ok(uri) = Uri::try_from(target) else {
        return;
    };
    let path = uri.path().to_owned();
    let request = Request::builder()
        .method(method.clone())
        .uri(uri)
        .body(Full::new(Bytes::copy_from_slice(body)))
        .expect("a request");
    let response = runtime().block_on(hub().handle(request, peer));
    let code = response.status().as_u16();
    let json = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let answer = runtime()
        .block_on(read_body(response.into_body()))
        .expect("a hub answer reads");

    if !peer.ip().is_loopback() && !OPEN.contains(&path.as_str()) {
        assert_eq!(code, 403, "{path} answered off loopback");
    }
    if code >= 400 && json {
        let status: serde_json::Value = serde_json::from_slice(&answer).expect("a Status parses");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], code);
    }
    // An answer may quote the request (a name not found); the cache's value must not leak.
    let asked = |bytes: &[u8]| {
        bytes
            .windows(SECRET_VALUE.len())
            .any(|w| w == SECRET_VALUE.as_bytes())
    };
    assert!(
        asked(rest)
            || !answer
                .windows(SECRET_VALUE.len())
                .any(|w| w == SECRET_VALUE.as_bytes()),
        "{method} {path} showed the Secret's value"
    );
    if path == "/v1/cache/object" && code == 200 {
        let object: serde_json::Value = serde_json::from_slice(&answer).expect("an object");
        if object["kind"] == "Secret" {
            assert_eq!(object["data"]["token"], "<redacted>");
        }
    }
});
