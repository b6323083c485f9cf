use super::*;

#[test]
fn join_keeps_path_and_query_and_takes_the_server() {
    let server: Uri = "https://10.0.0.1:6443".parse().unwrap();
    let target: Uri = "/api/v1/pods?watch=true&fieldSelector=a%3Db"
        .parse()
        .unwrap();
    assert_eq!(
        join(&server, &target).to_string(),
        "https://10.0.0.1:6443/api/v1/pods?watch=true&fieldSelector=a%3Db"
    );
}

/// Serves `count` requests with an empty `200`, and returns each one's head, lowercased.
async fn heads_of(listener: tokio::net::TcpListener, count: usize) -> Vec<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut heads = Vec::new();
    for _ in 0..count {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0];
            stream.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        heads.push(String::from_utf8_lossy(&head).to_lowercase());
    }
    heads
}

#[tokio::test]
async fn a_caller_only_request_never_gets_the_gateways_credentials() {
    use http_body_util::BodyExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: x\n\
             clusters: [{{name: c, cluster: {{server: 'http://{addr}'}}}}]\n\
             users: [{{name: u, user: {{token: gateway-secret}}}}]\n\
             contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n"
        ),
    )
    .unwrap();
    let credentials = Credentials::from_kubeconfig(&kubeconfig).await.unwrap();
    let transport = Transport::new(credentials, Duration::from_secs(30));
    let heads = tokio::spawn(heads_of(listener, 2));
    let server: Uri = format!("http://{addr}").parse().unwrap();
    for caller_only in [false, true] {
        let body = http_body_util::Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        let mut request = Request::get("/api").body(body).unwrap();
        if caller_only {
            request.extensions_mut().insert(CallerOnly);
        }
        transport.send(&server, request).await.unwrap();
    }
    let heads = heads.await.unwrap();
    assert!(
        heads[0].contains("authorization: bearer gateway-secret"),
        "{}",
        heads[0]
    );
    assert!(!heads[1].contains("authorization"), "{}", heads[1]);
    for head in &heads {
        assert_eq!(head.matches("\r\nhost: ").count(), 1, "{head}");
        assert!(head.contains(&format!("\r\nhost: {addr}\r\n")), "{head}");
    }
}

#[test]
fn the_host_is_the_servers_authority_as_the_client_writes_it() {
    let host = |server: &str| host_header(&server.parse().unwrap());
    assert_eq!(host("https://10.0.0.1:6443").unwrap(), "10.0.0.1:6443");
    assert_eq!(
        host("https://[2001:db8::1]:6443").unwrap(),
        "[2001:db8::1]:6443"
    );
    assert_eq!(host("http://apiserver").unwrap(), "apiserver");
    assert_eq!(host("http://apiserver:443").unwrap(), "apiserver:443");
    // Left to the client, which leaves out its scheme's own port and any user info.
    assert_eq!(host("https://apiserver:443"), None);
    assert_eq!(host("http://apiserver:80"), None);
    assert_eq!(host("https://user@apiserver:6443"), None);
}

#[test]
fn impersonation_headers_are_stripped() {
    let mut headers = http::HeaderMap::new();
    headers.insert("impersonate-user", "admin".parse().unwrap());
    headers.insert("impersonate-group", "system:masters".parse().unwrap());
    headers.insert("accept", "application/json".parse().unwrap());
    strip_impersonation(&mut headers);
    assert_eq!(headers.len(), 1);
}

/// A TLS server on 127.0.0.1 offering `h2` and `http/1.1` by ALPN, as kube-apiserver does.
/// Each answer says the HTTP version its request came over (`x-version`) and the number of
/// the connection it came on (`x-connection`, from 0); `/watch` answers one line and stays
/// open, as a watch does; a request with `Upgrade` is switched, and its bytes echoed.
mod alpn_server {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;
    use futures_util::StreamExt;
    use http_body_util::combinators::BoxBody;
    use http_body_util::{BodyExt, Full, StreamBody};
    use hyper::body::Frame;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    type Body = BoxBody<Bytes, Infallible>;

    /// The running server: its URL, and the kubeconfig of a client trusting it.
    pub struct AlpnServer {
        pub url: Uri,
        pub kubeconfig: std::path::PathBuf,
        _dir: tempfile::TempDir,
    }

    impl AlpnServer {
        pub async fn start() -> AlpnServer {
            let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
            let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
            leaf.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
            let key = KeyPair::generate().unwrap();
            let cert = leaf.signed_by(&key, &ca).unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut tls = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![CertificateDer::from(cert.der().to_vec())],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
                )
                .unwrap();
            tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                let connections = AtomicUsize::new(0);
                loop {
                    let (tcp, _) = listener.accept().await.unwrap();
                    let number = connections.fetch_add(1, Ordering::SeqCst);
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let tls = acceptor.accept(tcp).await.unwrap();
                        let service = hyper::service::service_fn(move |request| {
                            std::future::ready(Ok::<_, Infallible>(answer(request, number)))
                        });
                        let server =
                            hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                        let _ = server
                            .serve_connection_with_upgrades(TokioIo::new(tls), service)
                            .await;
                    });
                }
            });
            let dir = tempfile::tempdir().unwrap();
            let kubeconfig = dir.path().join("kubeconfig");
            let ca_data =
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ca.pem());
            std::fs::write(
                &kubeconfig,
                format!(
                    "apiVersion: v1\nkind: Config\ncurrent-context: x\n\
                     clusters: [{{name: c, cluster: {{server: 'https://{addr}', \
                     certificate-authority-data: '{ca_data}'}}}}]\n\
                     users: [{{name: u, user: {{token: gateway-secret}}}}]\n\
                     contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n"
                ),
            )
            .unwrap();
            AlpnServer {
                url: format!("https://{addr}").parse().unwrap(),
                kubeconfig,
                _dir: dir,
            }
        }
    }

    fn answer(mut request: Request<hyper::body::Incoming>, connection: usize) -> Response<Body> {
        let head = Response::builder()
            .header("x-version", format!("{:?}", request.version()))
            .header("x-connection", connection);
        if request.headers().contains_key(UPGRADE) {
            let upgrade = hyper::upgrade::on(&mut request);
            tokio::spawn(async move {
                let mut io = TokioIo::new(upgrade.await.unwrap());
                let mut word = [0; 4];
                io.read_exact(&mut word).await.unwrap();
                io.write_all(&word).await.unwrap();
            });
            return head
                .status(http::StatusCode::SWITCHING_PROTOCOLS)
                .header("connection", "upgrade")
                .header("upgrade", "echo")
                .body(Full::new(Bytes::new()).boxed())
                .unwrap();
        }
        if request.uri().path() == "/watch" {
            let first = futures_util::stream::once(async {
                Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"{\"type\":\"ADDED\"}\n")))
            });
            let open = first.chain(futures_util::stream::pending());
            return head.body(BodyExt::boxed(StreamBody::new(open))).unwrap();
        }
        head.body(Full::new(Bytes::from_static(b"{}")).boxed())
            .unwrap()
    }
}

use alpn_server::AlpnServer;
use http_body_util::BodyExt;

/// A GET of `path` on the gateway's identity, `Upgrade: echo` when `upgrade`.
fn get(path: &str, upgrade: bool) -> Request<RequestBody> {
    let mut request = Request::get(path);
    if upgrade {
        request = request
            .header("connection", "upgrade")
            .header("upgrade", "echo");
    }
    let body = http_body_util::Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync();
    request.body(body).unwrap()
}

/// A response's `x-version` and `x-connection` (what the server saw) and its own version.
fn seen(response: &Response<Incoming>) -> (String, String, http::Version) {
    let header = |name| response.headers()[name].to_str().unwrap().to_owned();
    (
        header("x-version"),
        header("x-connection"),
        response.version(),
    )
}

async fn transport(server: &AlpnServer, http2: bool) -> Transport {
    let credentials = Credentials::from_kubeconfig(&server.kubeconfig)
        .await
        .unwrap();
    Transport::new(credentials, Duration::from_secs(30)).with_http2(http2)
}

#[tokio::test]
async fn with_http2_a_watch_and_the_requests_after_it_share_one_h2_connection() {
    let server = AlpnServer::start().await;
    let transport = transport(&server, true).await;
    let mut watch = transport
        .send(&server.url, get("/watch", false))
        .await
        .unwrap();
    let (version, watch_connection, own) = seen(&watch);
    assert_eq!((version.as_str(), own), ("HTTP/2.0", http::Version::HTTP_2));
    let first = watch.body_mut().frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "{\"type\":\"ADDED\"}\n");
    // The watch stays open: over HTTP/1.1 each of these would need a connection of its own.
    for _ in 0..3 {
        let response = transport
            .send(&server.url, get("/api", false))
            .await
            .unwrap();
        let (version, connection, _) = seen(&response);
        assert_eq!(version, "HTTP/2.0");
        assert_eq!(connection, watch_connection, "a second connection");
        response.into_body().collect().await.unwrap();
    }
    drop(watch);
}

#[tokio::test]
async fn without_http2_requests_go_over_http1_each_open_response_its_own_connection() {
    let server = AlpnServer::start().await;
    let transport = transport(&server, false).await;
    let watch = transport
        .send(&server.url, get("/watch", false))
        .await
        .unwrap();
    let (version, watch_connection, own) = seen(&watch);
    assert_eq!(
        (version.as_str(), own),
        ("HTTP/1.1", http::Version::HTTP_11)
    );
    let response = transport
        .send(&server.url, get("/api", false))
        .await
        .unwrap();
    let (version, connection, _) = seen(&response);
    assert_eq!(version, "HTTP/1.1");
    assert_ne!(
        connection, watch_connection,
        "an HTTP/1.1 connection is one exchange at a time"
    );
}

#[tokio::test]
async fn with_http2_an_upgrade_goes_over_http1_and_switches() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = AlpnServer::start().await;
    let transport = transport(&server, true).await;
    // An h2 connection is up first, so the upgrade cannot have found it by chance.
    let plain = transport
        .send(&server.url, get("/api", false))
        .await
        .unwrap();
    assert_eq!(seen(&plain).0, "HTTP/2.0");
    for caller_only in [false, true] {
        let mut request = get("/exec", true);
        if caller_only {
            request.extensions_mut().insert(CallerOnly);
        }
        let mut response = transport.send(&server.url, request).await.unwrap();
        assert_eq!(response.status(), http::StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(seen(&response).0, "HTTP/1.1");
        let upgraded = hyper::upgrade::on(&mut response).await.unwrap();
        let mut io = hyper_util::rt::TokioIo::new(upgraded);
        io.write_all(b"ping").await.unwrap();
        let mut echoed = [0; 4];
        io.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping");
    }
}
