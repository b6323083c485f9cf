//! A stand-in for what a Kubernetes 1.21+ apiserver serves of `discovery.k8s.io/v1`
//! EndpointSlices, in front of the real 1.20 kube-apiserver (which serves `v1beta1` only):
//! an HTTPS reverse proxy on loopback whose every answer on that path is the real
//! apiserver's own `v1beta1` answer, converted as kube-apiserver converts v1beta1 → v1.
//!
//! - Discovery (`/apis`, `/apis/discovery.k8s.io`, `/apis/discovery.k8s.io/v1`) advertises
//!   `v1`, preferred, as 1.21 does (`standin_discovery`).
//! - Gets, lists (their resourceVersion and continue tokens are the real ones) and watches
//!   (bookmarks too) of `/apis/discovery.k8s.io/v1/…endpointslices…` are asked of the
//!   `v1beta1` path, with the same query and credentials; objects are converted in JSON
//!   ([`crate::standin_json`]) or, when protobuf was asked for, in protobuf
//!   (`standin_proto`); a watch event by event as it streams.
//! - Every other request passes through unchanged, so the stand-in serves this path only.
//!
//! Requests without an `Authorization` go upstream on the gateway's client certificate of
//! [`Pki`](crate::pki::Pki), as the gateway itself sends them; answers are never
//! compressed (a 1.21 apiserver gzips lists above 128 KiB); writes to the `v1` path and
//! connection upgrades are not served.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::oneshot;

use crate::cluster::Cluster;
use crate::standin_proxy::{Apiserver, Upstream, handle};

/// What the stand-in answered, as counters.
#[derive(Debug, Default)]
pub struct Counters {
    /// Discovery documents rewritten.
    pub discovery: AtomicU64,
    /// Gets and lists of the `v1` path answered in JSON.
    pub json_answers: AtomicU64,
    /// Gets and lists of the `v1` path answered in protobuf.
    pub protobuf_answers: AtomicU64,
    /// Watches of the `v1` path answered in JSON.
    pub json_watches: AtomicU64,
    /// Watches of the `v1` path answered in protobuf.
    pub protobuf_watches: AtomicU64,
    /// Events of JSON watches converted.
    pub json_events: AtomicU64,
    /// Events of protobuf watches converted.
    pub protobuf_events: AtomicU64,
    /// Requests sent to the real apiserver, whatever their path.
    pub forwarded: AtomicU64,
}

/// A moment's copy of [`Counters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// See [`Counters::discovery`].
    pub discovery: u64,
    /// See [`Counters::json_answers`].
    pub json_answers: u64,
    /// See [`Counters::protobuf_answers`].
    pub protobuf_answers: u64,
    /// See [`Counters::json_watches`].
    pub json_watches: u64,
    /// See [`Counters::protobuf_watches`].
    pub protobuf_watches: u64,
    /// See [`Counters::json_events`].
    pub json_events: u64,
    /// See [`Counters::protobuf_events`].
    pub protobuf_events: u64,
    /// See [`Counters::forwarded`].
    pub forwarded: u64,
}

/// The running stand-in.
#[derive(Debug)]
pub struct StandIn {
    /// Where it listens (HTTPS, the cluster's serving certificate).
    pub addr: SocketAddr,
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StandIn {
    /// Starts the stand-in for `cluster`'s apiserver on a free loopback port.
    pub fn start(cluster: &Cluster) -> Result<StandIn> {
        let pki = &cluster.pki;
        let server = server_tls(&pki.serving_cert, &pki.serving_key)?;
        let own = client_tls(&pki.ca_cert, Some((&pki.gateway_cert, &pki.gateway_key)))?;
        let bare = client_tls(&pki.ca_cert, None)?;
        let counters = Arc::new(Counters::default());
        let apiserver = Arc::new(Apiserver {
            base: cluster.url(),
            own: upstream(own),
            bare: upstream(bare),
            counters: counters.clone(),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("v1-slices-stand-in".to_owned())
            .spawn(move || runtime.block_on(serve(listener, server, apiserver, stopped)))?;
        Ok(StandIn {
            addr,
            counters,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The URL to give the gateway as its apiserver (or a relay's target, [`Self::addr`]).
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// What it answered so far.
    pub fn counts(&self) -> Counts {
        let c = &self.counters;
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Counts {
            discovery: read(&c.discovery),
            json_answers: read(&c.json_answers),
            protobuf_answers: read(&c.protobuf_answers),
            json_watches: read(&c.json_watches),
            protobuf_watches: read(&c.protobuf_watches),
            json_events: read(&c.json_events),
            protobuf_events: read(&c.protobuf_events),
            forwarded: read(&c.forwarded),
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections until `stopped`; the runtime's end then ends every one of them.
async fn serve(
    listener: std::net::TcpListener,
    tls: rustls::ServerConfig,
    apiserver: Arc<Apiserver>,
    mut stopped: oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((tcp, _)) = accepted else { continue };
        let (acceptor, apiserver) = (acceptor.clone(), apiserver.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service =
                hyper::service::service_fn(move |request| handle(apiserver.clone(), request));
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let _ = builder.serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The apiserver's serving certificate, HTTP/2 and HTTP/1.1 offered as kube-apiserver does.
fn server_tls(cert: &Path, key: &Path) -> Result<rustls::ServerConfig> {
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key).context("the serving key")?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// A client trusting `ca`, presenting `identity` (certificate and key) if given.
fn client_tls(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    Ok(match identity {
        Some((cert, key)) => {
            let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
            builder.with_client_auth_cert(certs, PrivateKeyDer::from_pem_file(key)?)?
        }
        None => builder.with_no_client_auth(),
    })
}

fn upstream(tls: rustls::ClientConfig) -> Upstream {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(https)
}
