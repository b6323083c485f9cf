//! Accepting connections: HTTP/1.1 (with upgrades) and HTTP/2, in the clear or over TLS,
//! each connection on its own task and registered for graceful shutdown. A TLS client's
//! verified certificate is handed to each of its requests as an extension
//! (`Arc<PeerCertificate>`). A connection with no request in flight is closed after a while
//! (see [`activity`]), so idle or silent clients cannot hold file descriptors forever.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::activity::Activity;
use super::caller::PeerCertificate;
use crate::reply::ResponseBody;

/// How long a client may take to send its request headers (or finish its TLS handshake):
/// a slow or stuck client does not hold a connection slot forever.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection that has sent requests may then stay with none in flight: as
/// kube-apiserver's `IdleTimeout`. It closes idle HTTP/2 connections; an idle HTTP/1.1 one is
/// closed sooner, by the header read timeout, which hyper also runs between requests.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves every connection `listener` accepts with `handler` (over TLS when `tls` is given),
/// until the future is dropped.
pub async fn serve<F, Fut>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    graceful: &GracefulShutdown,
    handler: F,
) where
    F: Fn(Request<Incoming>, SocketAddr) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<ResponseBody>> + Send + 'static,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder.http2().timer(TokioTimer::new());
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (builder, handler, watcher, tls) = (
            builder.clone(),
            handler.clone(),
            graceful.watcher(),
            tls.clone(),
        );
        tokio::spawn(async move {
            match tls {
                None => connection(builder, stream, peer, None, handler, watcher).await,
                Some(tls) => {
                    match tokio::time::timeout(HEADER_READ_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            // Present only when the handshake verified it.
                            let certificate = stream
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(<[_]>::first)
                                .and_then(|der| PeerCertificate::of(der))
                                .map(Arc::new);
                            connection(builder, stream, peer, certificate, handler, watcher).await;
                        }
                        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

/// Serves one connection until it closes.
async fn connection<I, F, Fut>(
    builder: auto::Builder<TokioExecutor>,
    io: I,
    peer: SocketAddr,
    certificate: Option<Arc<PeerCertificate>>,
    handler: F,
    watcher: Watcher,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>, SocketAddr) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<ResponseBody>> + Send + 'static,
{
    let activity = Activity::new();
    let requests = activity.clone();
    let service = service_fn(move |mut request: Request<Incoming>| {
        if let Some(certificate) = &certificate {
            request.extensions_mut().insert(certificate.clone());
        }
        // In flight from now until its response body is sent or dropped.
        let busy = requests.enter();
        // Boxed: hyper keeps a box the size of the service's future for as long as the
        // connection lives, whether a request is in flight or not. Boxed, the handler's
        // future (some 2 KB, its route boxed in turn) is held only while its request is
        // answered.
        let response = Box::pin(handler(request, peer));
        async move { Ok::<_, Infallible>(busy.hold(response.await)) }
    });
    let connection = builder
        .serve_connection_with_upgrades(TokioIo::new(io), service)
        .into_owned();
    // Nothing is in flight when the idle wait ends: dropping the connection closes it.
    // Before the first request hyper's own header read timeout does not run (it begins
    // only once HTTP/1.1 is told from HTTP/2 by the first bytes), so the idle wait covers
    // a client that sends nothing, or the HTTP/2 preface byte by byte.
    tokio::select! {
        ended = watcher.watch(connection) => {
            if let Err(error) = ended {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        }
        () = activity.idle(HEADER_READ_TIMEOUT, IDLE_TIMEOUT) => {
            tracing::debug!(%peer, "idle connection closed");
        }
    }
}
