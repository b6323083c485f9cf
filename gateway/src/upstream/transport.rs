//! Sending a request to one apiserver over pooled connections, on the right identity: the
//! request's own `Authorization` if it carries one, else the gateway's — except for a
//! request marked [`CallerOnly`], which never gets the gateway's. Connections speak
//! HTTP/1.1, or with `--upstream-http2` HTTP/2 where the server offers it by ALPN (one
//! connection an identity carrying every request to that server); a protocol upgrade always
//! goes over HTTP/1.1, since HTTP/2 has no `Upgrade`.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use bytes::Bytes;
use http::header::{AUTHORIZATION, HOST, HeaderName, HeaderValue, UPGRADE};
use http::{Request, Response, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use thiserror::Error;

use super::credentials::Credentials;
pub use super::link::{CONNECT_CAP, CONNECT_TIMEOUT};
use super::link::{LinkConnector, Links};

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

/// TCP keep-alive on upstream connections, so a watch over a silently dead link is noticed.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);
/// Idle pooled connections are closed after this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// An HTTP/2 connection is pinged this often, busy or idle: it carries every request to its
/// server, so one that went silent (a cut link, a lost NAT mapping) must leave the pool
/// rather than take the requests made after the link is back. TCP keep-alive would not
/// find it while data waits unacknowledged, and retransmissions back off for minutes.
const H2_PING_EVERY: Duration = Duration::from_secs(10);
/// An HTTP/2 connection whose ping goes unanswered this long is closed, with its streams: a
/// silent connection is gone within 15 s, after which a request connects anew, as over
/// HTTP/1.1. Far longer than a live server's round trip, however loaded.
const H2_PING_TIMEOUT: Duration = Duration::from_secs(5);
/// Credit for the whole HTTP/2 connection, as Go's client gives (1 GiB): data a stalled
/// stream holds (a watch whose client reads slowly) counts against it, so a window near a
/// stream's would let two or three stalled watches stop every other request on the
/// connection. What a stream may hold unread is bounded by its own window, hyper's 2 MiB,
/// as a slow reader's TCP buffer bounds it over HTTP/1.1. (hyper's adaptive window sets both
/// windows alike, which is why it is off.)
const H2_CONNECTION_WINDOW: u32 = 1 << 30;

/// Headers that must not be sent on the gateway's identity: impersonation is for callers
/// that authenticate themselves.
const IMPERSONATION_PREFIX: &str = "impersonate-";

type HttpsClient = Client<HttpsConnector<LinkConnector>, RequestBody>;

/// A request extension: the request travels on its caller's credentials only (the HTTPS
/// proxy's callers); without an `Authorization` it goes anonymous, never on the gateway's
/// identity.
#[derive(Clone, Copy, Debug)]
pub struct CallerOnly;

/// Pooled clients for the two identities.
#[derive(Clone)]
pub struct Transport {
    own: Arc<ArcSwap<OwnClient>>,
    bare: Pools,
    credentials: Credentials,
    timeout: Duration,
    /// Whether HTTP/2 is offered (`--upstream-http2`).
    http2: bool,
    /// What is known of the link to each server.
    links: Links,
}

/// The client of the gateway's own identity, and the generation of its client certificate
/// files it was made with: when they change, a new client (a new pool) is made, so the
/// next request connects with the new certificate, as client-go does at a rotation.
/// Responses in flight (watches) keep their connections until they end.
struct OwnClient {
    generation: u64,
    pools: Pools,
}

/// One identity's clients: `any` offers HTTP/2 by ALPN when the gateway is told to, `http1`
/// never does. Without HTTP/2 the two are one client, one pool.
#[derive(Clone)]
struct Pools {
    any: HttpsClient,
    http1: HttpsClient,
}

impl Pools {
    fn new(tls: rustls::ClientConfig, http2: bool, links: &Links) -> Pools {
        let http1 = client(tls.clone(), false, links);
        let any = if http2 {
            client(tls, true, links)
        } else {
            http1.clone()
        };
        Pools { any, http1 }
    }

    /// The client for `request`: HTTP/1.1 for a protocol upgrade (exec, attach,
    /// port-forward), which only HTTP/1.1 can switch; the proxy keeps `Upgrade` on upgrades
    /// only, as a hop-by-hop header.
    fn for_request<B>(&self, request: &Request<B>) -> &HttpsClient {
        if request.headers().contains_key(UPGRADE) {
            &self.http1
        } else {
            &self.any
        }
    }
}

impl Transport {
    /// Builds HTTP/1.1 clients; `timeout` bounds the wait for a response to begin.
    pub fn new(credentials: Credentials, timeout: Duration) -> Transport {
        Transport::build(credentials, timeout, false)
    }

    /// The same transport, offering HTTP/2 by ALPN when `on` (`--upstream-http2`).
    pub fn with_http2(self, on: bool) -> Transport {
        if on == self.http2 {
            return self;
        }
        Transport::build(self.credentials, self.timeout, on)
    }

    /// Whether `server`'s connections delivered bytes since `start`: a server whose probe
    /// or connect began then and timed out is slow (a thin link's queue), not gone.
    pub fn heard_since(&self, server: &Uri, start: std::time::Instant) -> bool {
        self.links.since(server, start)
    }

    /// Takes the time of one exchange `server` answered (a probe), for its round trip.
    pub fn answered_in(&self, server: &Uri, took: Duration) {
        self.links.answered_in(server, took);
    }

    /// How long a probe of `server` waits: `floor`, or longer as its round trip asks, up to
    /// `cap`.
    pub fn probe_timeout(&self, server: &Uri, floor: Duration, cap: Duration) -> Duration {
        self.links.timeout(server, floor, cap)
    }

    fn build(credentials: Credentials, timeout: Duration, http2: bool) -> Transport {
        let links = Links::new();
        let generation = credentials
            .cert_files
            .as_ref()
            .map_or(0, |f| f.generation());
        Transport {
            own: Arc::new(ArcSwap::from_pointee(OwnClient {
                generation,
                pools: Pools::new((*credentials.own_tls).clone(), http2, &links),
            })),
            bare: Pools::new((*credentials.bare_tls).clone(), http2, &links),
            credentials,
            timeout,
            http2,
            links,
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
            pools: Pools::new(tls, self.http2, &self.links),
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
        let pools = if caller_only || request.headers().contains_key(AUTHORIZATION) {
            &self.bare
        } else {
            strip_impersonation(request.headers_mut());
            if let Some(value) = self.credentials.authorization() {
                request.headers_mut().insert(AUTHORIZATION, value);
            }
            own = self.own();
            &own.pools
        };
        // HTTP/1.1 names the server in `Host`. The client would write it for each request;
        // the server's authority is taken as it stands instead, where it is what the client
        // would write (HTTP/2 names the server otherwise, and the client knows which it speaks).
        if !self.http2
            && let Some(host) = host_header(server)
            && let http::header::Entry::Vacant(entry) = request.headers_mut().entry(HOST)
        {
            entry.insert(host);
        }
        let client = pools.for_request(&request);
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

/// A pooled client over `tls`; with `http2`, it offers `h2` and `http/1.1` by ALPN and
/// speaks what the server picks (plain `http://` servers get HTTP/1.1).
fn client(tls: rustls::ClientConfig, http2: bool, links: &Links) -> HttpsClient {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(CONNECT_CAP));
    http.set_keepalive(Some(TCP_KEEPALIVE));
    let http = LinkConnector::new(http, links.clone());
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1();
    let https = if http2 {
        builder.enable_http2().wrap_connector(http)
    } else {
        builder.wrap_connector(http)
    };
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .http2_keep_alive_interval(H2_PING_EVERY)
        .http2_keep_alive_timeout(H2_PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .http2_initial_connection_window_size(H2_CONNECTION_WINDOW)
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

/// The `Host` of a request to `server` as hyper's client writes it (the host, and the port
/// unless it is the scheme's own), when it is the server's authority as written: `None`
/// for one with user info or its scheme's own port, which the client then writes.
fn host_header(server: &Uri) -> Option<HeaderValue> {
    let authority = server.authority()?;
    let own_port = match server.scheme_str() {
        Some("https") => 443,
        _ => 80,
    };
    if authority.as_str().contains('@') || authority.port_u16() == Some(own_port) {
        return None;
    }
    HeaderValue::from_str(authority.as_str()).ok()
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
mod tests;
