//! The distribution API's token flow, which Debian's docker-registry (the e2e test's) does
//! not serve: a registry on loopback TLS answering `401` with a Bearer challenge, a token
//! service asking for the login, and a blob behind a redirect to storage elsewhere. The pull
//! fetches one token, sends it, follows the redirect without it, and checks both digests.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::{Digest, Reference, Registries, RegistrySettings};

const COMPONENT: &[u8] = b"\0asm a component behind a token";
const TOKEN: &str = "t0ken";

/// What the fake registry saw.
#[derive(Default)]
struct Seen {
    token_requests: AtomicUsize,
    storage_with_credentials: AtomicUsize,
}

fn manifest() -> Bytes {
    let layer = Digest::of(COMPONENT);
    Bytes::from(format!(
        r#"{{"schemaVersion":2,"layers":[{{"mediaType":"application/wasm","digest":"{layer}","size":{}}}]}}"#,
        COMPONENT.len()
    ))
}

fn answer(request: &Request<Incoming>, addr: &str, seen: &Seen) -> Response<Full<Bytes>> {
    let auth = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let path = request.uri().path();
    let query = request.uri().query().unwrap_or_default();
    let reply = |status: StatusCode, body: Bytes| {
        let mut response = Response::new(Full::new(body));
        *response.status_mut() = status;
        response
    };
    if path == "/token" {
        seen.token_requests.fetch_add(1, Ordering::SeqCst);
        let login = format!(
            "Basic {}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "u:p")
        );
        let scoped = query.contains("service=fake-registry")
            && query.contains("scope=repository%3Af%2Fms%3Apull");
        return if auth == login && scoped {
            reply(
                StatusCode::OK,
                Bytes::from(format!(r#"{{"access_token":"{TOKEN}"}}"#)),
            )
        } else {
            reply(StatusCode::UNAUTHORIZED, Bytes::new())
        };
    }
    if path.starts_with("/storage/") {
        if !auth.is_empty() {
            seen.storage_with_credentials.fetch_add(1, Ordering::SeqCst);
        }
        return reply(StatusCode::OK, Bytes::from_static(COMPONENT));
    }
    if auth != format!("Bearer {TOKEN}") {
        let mut response = reply(StatusCode::UNAUTHORIZED, Bytes::new());
        let challenge = format!(
            r#"Bearer realm="https://{addr}/token",service="fake-registry",scope="repository:f/ms:pull""#
        );
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge.parse().unwrap());
        return response;
    }
    if path.starts_with("/v2/f/ms/manifests/") {
        return reply(StatusCode::OK, manifest());
    }
    if path.starts_with("/v2/f/ms/blobs/") {
        let mut response = reply(StatusCode::TEMPORARY_REDIRECT, Bytes::new());
        response
            .headers_mut()
            .insert(header::LOCATION, "/storage/blob?signed=1".parse().unwrap());
        return response;
    }
    reply(StatusCode::NOT_FOUND, Bytes::new())
}

/// The fake registry on loopback TLS: its address and the CA file that trusts it.
async fn serve(seen: Arc<Seen>, dir: &std::path::Path) -> (String, std::path::PathBuf) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
    leaf.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca).unwrap();
    let tls = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let served = addr.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, seen, addr) = (acceptor.clone(), seen.clone(), served.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |request| {
                    std::future::ready(Ok::<_, Infallible>(answer(&request, &addr, &seen)))
                });
                let server = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = server.serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });
    let ca_file = dir.join("ca.crt");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    (addr, ca_file)
}

#[tokio::test]
async fn a_bearer_challenge_is_answered_with_a_token_and_storage_gets_no_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Seen::default());
    let (addr, ca_file) = serve(seen.clone(), dir.path()).await;
    let logins = dir.path().join("config.json");
    std::fs::write(
        &logins,
        format!(r#"{{"auths":{{"{addr}":{{"username":"u","password":"p"}}}}}}"#),
    )
    .unwrap();
    let registries = Registries::new(&RegistrySettings {
        ca_file: Some(ca_file.clone()),
        logins_file: Some(logins),
    })
    .unwrap();
    let image = Reference::parse(&format!("{addr}/f/ms@{}", Digest::of(&manifest()))).unwrap();
    let pulled = registries.pull(&image).await.unwrap();
    assert_eq!(&pulled.component[..], COMPONENT);
    assert_eq!(
        seen.token_requests.load(Ordering::SeqCst),
        1,
        "one token for the repository"
    );
    assert_eq!(seen.storage_with_credentials.load(Ordering::SeqCst), 0);

    // Without a login the token service refuses, and the pull says so.
    let anonymous = Registries::new(&RegistrySettings {
        ca_file: Some(ca_file),
        logins_file: None,
    })
    .unwrap();
    let error = anonymous.pull(&image).await.unwrap_err();
    assert!(error.to_string().contains("unauthorized"), "{error}");
}
