//! When each apiserver was last heard from: the time its connections last delivered bytes,
//! kept by the connector that makes them. On a thin link a probe or a connect can wait
//! behind a queue of list and watch data for longer than its timeout; the server is then
//! slow, not gone, and the health checker must not take the node offline for it (OpenYurt
//! #1101: on 50 kbit/s links the hub flipped offline under its own initial lists).

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

/// The last time each server's connections delivered bytes, by authority (`host:port`).
#[derive(Clone, Debug)]
pub struct Heard {
    base: Instant,
    servers: Arc<Mutex<HashMap<String, Arc<AtomicU64>>>>,
}

impl Default for Heard {
    fn default() -> Self {
        Heard::new()
    }
}

impl Heard {
    /// Nothing heard yet.
    pub fn new() -> Heard {
        Heard {
            base: Instant::now(),
            servers: Arc::default(),
        }
    }

    /// The clock of `server`'s connections (made on first use).
    fn clock(&self, server: &Uri) -> Clock {
        let key = authority(server);
        let mut servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        let last = servers.entry(key).or_default().clone();
        Clock {
            base: self.base,
            last,
        }
    }

    /// Whether `server`'s connections delivered bytes within the last `window`.
    pub fn within(&self, server: &Uri, window: Duration) -> bool {
        let servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(last) = servers.get(&authority(server)) else {
            return false;
        };
        // 0 is "never": a clock starts at 1 ms past the base.
        let at = last.load(Ordering::Relaxed);
        at != 0 && self.now_ms().saturating_sub(at) <= millis(window)
    }

    fn now_ms(&self) -> u64 {
        millis(self.base.elapsed()) + 1
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
    last: Arc<AtomicU64>,
}

impl Clock {
    fn tick(&self) {
        self.last
            .store(millis(self.base.elapsed()) + 1, Ordering::Relaxed);
    }
}

/// [`HttpConnector`] whose connections tick their server's clock as bytes arrive.
#[derive(Clone, Debug)]
pub struct HeardConnector {
    inner: HttpConnector,
    heard: Heard,
}

impl HeardConnector {
    /// `inner`'s connections, heard into `heard`.
    pub fn new(inner: HttpConnector, heard: Heard) -> HeardConnector {
        HeardConnector { inner, heard }
    }
}

impl tower_service::Service<Uri> for HeardConnector {
    type Response = TokioIo<HeardStream>;
    type Error = <HttpConnector as tower_service::Service<Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, server: Uri) -> Self::Future {
        let clock = self.heard.clock(&server);
        let connecting = self.inner.call(server);
        Box::pin(async move {
            let stream = connecting.await?.into_inner();
            Ok(TokioIo::new(HeardStream { stream, clock }))
        })
    }
}

/// A TCP connection to an apiserver that ticks the server's clock on every read with data.
#[derive(Debug)]
pub struct HeardStream {
    stream: TcpStream,
    clock: Clock,
}

impl AsyncRead for HeardStream {
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

impl AsyncWrite for HeardStream {
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

impl Connection for HeardStream {
    fn connected(&self) -> Connected {
        self.stream.connected()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn a_server_is_heard_once_its_connection_delivers_bytes() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server: Uri = format!("http://{address}").parse().unwrap();
        let other: Uri = "http://127.0.0.1:1".parse().unwrap();
        let heard = Heard::new();
        let mut connector = HeardConnector::new(HttpConnector::new(), heard.clone());
        let connecting = tower_service::Service::call(&mut connector, server.clone());
        let (accepted, connected) = tokio::join!(listener.accept(), connecting);
        let (mut peer, _) = accepted.unwrap();
        let mut stream = connected.unwrap().into_inner();
        let day = Duration::from_secs(86_400);
        assert!(!heard.within(&server, day), "connected, nothing read yet");

        peer.write_all(b"HTTP/1.1 200 OK\r\n").await.unwrap();
        let mut read = [0u8; 64];
        let n = stream.read(&mut read).await.unwrap();
        assert!(n > 0);
        assert!(heard.within(&server, day));
        assert!(!heard.within(&other, day), "another server is not heard");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !heard.within(&server, Duration::from_millis(5)),
            "nothing heard in the last 5 ms of 20 without a read"
        );
        let with_default_port: Uri = "https://198.18.0.1".parse().unwrap();
        assert_eq!(authority(&with_default_port), "198.18.0.1:443");
    }
}
