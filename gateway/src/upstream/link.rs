//! What the gateway learns of the link to each apiserver: when its connections last
//! delivered bytes (kept by the connector that makes them), and its round trip (from the
//! probes it answered). On a thin link a probe or a connect can wait behind a queue of list
//! and watch data for longer than a fast link's timeout; the server is then slow, not gone,
//! and the health checker must not take the node offline for it (OpenYurt #1101: on
//! 50 kbit/s links the hub flipped offline under its own initial lists).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::round_trip::RoundTrip;
use crate::error::BoxError;

/// How long a TCP connect to an apiserver may take: a dead server is told from a live one
/// well inside the 3 s clients tolerate. A server whose round trip is longer (a thin link)
/// gets as long as it asks, up to [`CONNECT_CAP`].
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest a connect waits, however slow the server's link.
pub const CONNECT_CAP: Duration = Duration::from_secs(10);

/// Each server's link, by authority (`host:port`).
#[derive(Clone, Debug)]
pub struct Links {
    base: Instant,
    servers: Arc<Mutex<HashMap<String, Arc<Link>>>>,
}

/// One server's link.
#[derive(Debug, Default)]
struct Link {
    /// When its connections last delivered bytes: ms past the base, plus one (0: never).
    last: AtomicU64,
    round_trip: Mutex<RoundTrip>,
}

impl Link {
    fn timeout(&self, floor: Duration, cap: Duration) -> Duration {
        let round_trip = self
            .round_trip
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        round_trip.timeout(floor, cap)
    }
}

impl Default for Links {
    fn default() -> Self {
        Links::new()
    }
}

impl Links {
    /// Nothing links yet.
    pub fn new() -> Links {
        Links {
            base: Instant::now(),
            servers: Arc::default(),
        }
    }

    /// `server`'s link (made on first use).
    fn link(&self, server: &Uri) -> Arc<Link> {
        let mut servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        servers.entry(authority(server)).or_default().clone()
    }

    /// Whether `server`'s connections delivered bytes since `start` (or within the
    /// millisecond before it): a test of what arrived during one exchange that a late
    /// look cannot fail, as a window measured back from now would.
    pub fn since(&self, server: &Uri, start: Instant) -> bool {
        let at = self.link(server).last.load(Ordering::Relaxed);
        at != 0 && at > millis(start.saturating_duration_since(self.base))
    }

    /// Takes the time of one exchange `server` answered.
    pub fn answered_in(&self, server: &Uri, took: Duration) {
        let link = self.link(server);
        let mut round_trip = link
            .round_trip
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        round_trip.observe(took);
    }

    /// How long to wait for `server`'s answer: its round trip's timeout, within
    /// `floor..=cap`.
    pub fn timeout(&self, server: &Uri, floor: Duration, cap: Duration) -> Duration {
        self.link(server).timeout(floor, cap)
    }
}

/// A server's key: its authority, with the scheme's default port made explicit.
fn authority(server: &Uri) -> String {
    let host = server.host().unwrap_or_default();
    let port = server
        .port_u16()
        .unwrap_or(if server.scheme_str() == Some("http") {
            80
        } else {
            443
        });
    format!("{host}:{port}")
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// One server's clock, as its connections hold it.
#[derive(Clone, Debug)]
struct Clock {
    base: Instant,
    link: Arc<Link>,
}

impl Clock {
    fn tick(&self) {
        self.link
            .last
            .store(millis(self.base.elapsed()) + 1, Ordering::Relaxed);
    }
}

/// [`HttpConnector`] whose connections tick their server's clock as bytes arrive, and whose
/// connect waits [`CONNECT_TIMEOUT`], or longer as the server's round trip asks, up to
/// [`CONNECT_CAP`].
#[derive(Clone, Debug)]
pub struct LinkConnector {
    inner: HttpConnector,
    links: Links,
}

impl LinkConnector {
    /// `inner`'s connections, links into `links`.
    pub fn new(inner: HttpConnector, links: Links) -> LinkConnector {
        LinkConnector { inner, links }
    }
}

impl tower_service::Service<Uri> for LinkConnector {
    type Response = TokioIo<LinkStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, server: Uri) -> Self::Future {
        let link = self.links.link(&server);
        let limit = link.timeout(CONNECT_TIMEOUT, CONNECT_CAP);
        let clock = Clock {
            base: self.links.base,
            link,
        };
        let connecting = self.inner.call(server);
        Box::pin(async move {
            let connected = tokio::time::timeout(limit, connecting).await.map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no connection within {limit:?}"),
                )
            })?;
            let stream = connected?.into_inner();
            Ok(TokioIo::new(LinkStream { stream, clock }))
        })
    }
}

/// A TCP connection to an apiserver that ticks the server's clock on every read with data.
#[derive(Debug)]
pub struct LinkStream {
    stream: TcpStream,
    clock: Clock,
}

impl AsyncRead for LinkStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.tick();
        }
        polled
    }
}

impl AsyncWrite for LinkStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl Connection for LinkStream {
    fn connected(&self) -> Connected {
        self.stream.connected()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn a_server_is_links_once_its_connection_delivers_bytes() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server: Uri = format!("http://{address}").parse().unwrap();
        let other: Uri = "http://127.0.0.1:1".parse().unwrap();
        let links = Links::new();
        let mut connector = LinkConnector::new(HttpConnector::new(), links.clone());
        let connecting = tower_service::Service::call(&mut connector, server.clone());
        let (accepted, connected) = tokio::join!(listener.accept(), connecting);
        let (mut peer, _) = accepted.unwrap();
        let mut stream = connected.unwrap().into_inner();
        let started = Instant::now();
        assert!(
            !links.since(&server, started),
            "connected, nothing read yet"
        );

        peer.write_all(b"HTTP/1.1 200 OK\r\n").await.unwrap();
        let mut read = [0u8; 64];
        let n = stream.read(&mut read).await.unwrap();
        assert!(n > 0);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let later = Instant::now();
        assert!(links.since(&server, started), "bytes came after the start");
        assert!(
            !links.since(&server, later),
            "nothing came after the last read"
        );
        assert!(
            !links.since(&other, started),
            "another server heard nothing"
        );
        let with_default_port: Uri = "https://198.18.0.1".parse().unwrap();
        assert_eq!(authority(&with_default_port), "198.18.0.1:443");
    }
}
