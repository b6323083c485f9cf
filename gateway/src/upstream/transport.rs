//! Sending a request to one apiserver over pooled HTTP/1.1 connections, on the right identity:
//! the request's own `Authorization` if it carries one, else the gateway's — except for a
//! request marked [`CallerOnly`], which never gets the gateway's.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use bytes::Bytes;
use http::header::{AUTHORIZATION, HeaderName};
use http::{Request, Response, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use thiserror::Error;

use super::credentials::Credentials;

pub use crate::error::BoxError;

/// The body type requests are sent with.
pub type RequestBody = UnsyncBoxBody<Bytes, BoxError>;

/// Why a request did not get a response from the apiserver.
#[derive(Debug, Error)]
pub enum TransportError {
    /// No connection could be made to the server.
    #[error("cannot connect to {server}")]
    Connect {
        /// The server.
        server: String,
        /// What went wrong.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// The connection was made but the exchange failed before a response arrived.
    #[error("request to {server} failed")]
    Exchange {
        /// The server.
        server: String,
        /// What went wrong.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// The response did not begin within the request timeout.
    #[error("{server} did not answer within {timeout:?}")]
    Timeout {
        /// The server.
        server: String,
        /// The timeout that passed.
        timeout: Duration,
    },
}

/// How long a TCP connect to an apiserver may take: a dead server is told from a live one
/// well inside the 3 s clients tolerate.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// TCP keep-alive on upstream connections, so a watch over a silently dead link is noticed.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);
/// Idle pooled connections are closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Headers that must not be sent on the gateway's identity: impersonation is for callers
/// that authenticate themselves.
const IMPERSONATION_PREFIX: &str = "impersonate-";

type HttpsClient = Client<HttpsConnector<HttpConnector>, RequestBody>;

/// A request extension: the request travels on its caller's credentials only (the HTTPS
/// proxy's callers); without an `Authorization` it goes anonymous, never on the gateway's
/// identity.
#[derive(Clone, Copy, Debug)]
pub struct CallerOnly;

/// Pooled clients for the two identities.
#[derive(Clone)]
pub struct Transport {
    own: Arc<ArcSwap<OwnClient>>,
    bare: HttpsClient,
    credentials: Credentials,
    timeout: Duration,
}

/// The client of the gateway's own identity, and the generation of its client certificate
/// files it was made with: when they change, a new client (a new pool) is made, so the
/// next request connects with the new certificate, as client-go does at a rotation.
/// Responses in flight (watches) keep their connections until they end.
struct OwnClient {
    generation: u64,
    client: HttpsClient,
}

impl Transport {
    /// Builds the clients; `timeout` bounds the wait for a response to begin.
    pub fn new(credentials: Credentials, timeout: Duration) -> Transport {
        let generation = credentials
            .cert_files
            .as_ref()
            .map_or(0, |f| f.generation());
        Transport {
            own: Arc::new(ArcSwap::from_pointee(OwnClient {
                generation,
                client: client((*credentials.own_tls).clone()),
            })),
            bare: client((*credentials.bare_tls).clone()),
            credentials,
            timeout,
        }
    }

    /// The client of the gateway's own identity, made anew when its certificate changed.
    fn own(&self) -> Arc<OwnClient> {
        let current = self.own.load_full();
        let Some(files) = &self.credentials.cert_files else {
            return current;
        };
        let generation = files.generation();
        if generation == current.generation {
            return current;
        }
        let mut tls = (*self.credentials.own_tls).clone();
        // A session resumed from the old store would keep the old identity: TLS resumption
        // sends no certificate, and the server restores the one of the first handshake.
        tls.resumption = rustls::client::Resumption::default();
        let fresh = Arc::new(OwnClient {
            generation,
            client: client(tls),
        });
        self.own.store(fresh.clone());
        fresh
    }

    /// Sends `request` (whose URI carries only a path and query) to `server`.
    pub async fn send(
        &self,
        server: &Uri,
        mut request: Request<RequestBody>,
    ) -> Result<Response<Incoming>, TransportError> {
        *request.uri_mut() = join(server, request.uri());
        let own;
        let caller_only = request.extensions().get::<CallerOnly>().is_some();
        let client = if caller_only || request.headers().contains_key(AUTHORIZATION) {
            &self.bare
        } else {
            strip_impersonation(request.headers_mut());
            if let Some(value) = self.credentials.authorization() {
                request.headers_mut().insert(AUTHORIZATION, value);
            }
            own = self.own();
            &own.client
        };
        let server_name = || server.to_string();
        match tokio::time::timeout(self.timeout, client.request(request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(source)) if source.is_connect() => Err(TransportError::Connect {
                server: server_name(),
                source,
            }),
            Ok(Err(source)) => Err(TransportError::Exchange {
                server: server_name(),
                source,
            }),
            Err(_) => Err(TransportError::Timeout {
                server: server_name(),
                timeout: self.timeout,
            }),
        }
    }
}

fn client(tls: rustls::ClientConfig) -> HttpsClient {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_keepalive(Some(TCP_KEEPALIVE));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .build(https)
}

/// `server` (scheme and authority) joined with the path and query of `target`.
fn join(server: &Uri, target: &Uri) -> Uri {
    let mut parts = http::uri::Parts::default();
    parts.scheme = server.scheme().cloned();
    parts.authority = server.authority().cloned();
    parts.path_and_query = target.path_and_query().cloned();
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
    }
    // A scheme, an authority and a path always make a valid URI.
    Uri::from_parts(parts).unwrap_or_else(|_| server.clone())
}

fn strip_impersonation(headers: &mut http::HeaderMap) {
    let doomed: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().starts_with(IMPERSONATION_PREFIX))
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
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
}
