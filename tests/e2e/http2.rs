//! HTTP/2 toward clients: the HTTPS proxy offers `h2` by ALPN, as kube-apiserver does, and
//! client-go takes it. Over one connection, many requests at once and a watch. And toward
//! kube-apiserver with `--upstream-http2`: the node's requests and watches over one
//! connection, upgrades still switched over HTTP/1.1.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use edgegate_testkit::ADMIN_TOKEN;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use crate::support::{Env, Watch, get, namespace, runtime};

/// Requests sent at once over the one connection.
const AT_ONCE: usize = 32;

type Sender = http2::SendRequest<Empty<Bytes>>;

/// A client speaking only HTTP/2 to the HTTPS proxy: the connection is HTTP/2 (ALPN `h2`),
/// 32 gets at once over it are each answered with what the plain proxy answers, and a
/// watch over it streams an event while the gets go on.
pub fn http2_clients_are_served_over_one_connection(env: &Env) -> Result<()> {
    let (gateway, port) = env.https_gateway()?;
    let pki = &env.cluster.pki;
    let ns = namespace(&env.cluster, "http2")?;
    env.cluster
        .kubectl(&["create", "configmap", "a", "-n", &ns])?;
    let rt = runtime();
    let path = format!("/api/v1/namespaces/{ns}/configmaps/a");
    let (status, over_http1) = rt.block_on(get(
        &crate::support::client(),
        &format!("{}{path}", gateway.url()),
    ))?;
    ensure!(status == 200, "over HTTP/1.1: {status}");

    rt.block_on(async {
        let (sender, alpn) = connect(port, &pki.ca_cert).await?;
        ensure!(alpn.as_deref() == Some(&b"h2"[..]), "ALPN chose {alpn:?}");
        let watch_path = format!("/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion=0");
        let mut watch = send(&sender, &watch_path).await?;
        ensure!(
            watch.version() == http::Version::HTTP_2 && watch.status() == 200,
            "the watch: {watch:?}"
        );
        let gets = (0..AT_ONCE).map(|_| {
            let sender = sender.clone();
            let path = path.clone();
            async move {
                let response = send(&sender, &path).await?;
                ensure!(
                    response.version() == http::Version::HTTP_2,
                    "{:?}",
                    response.version()
                );
                let status = response.status();
                let body = response.into_body().collect().await?.to_bytes();
                Ok::<_, anyhow::Error>((status, body))
            }
        });
        for answer in futures_util::future::join_all(gets).await {
            let (status, body) = answer?;
            ensure!(
                status == 200 && body == over_http1,
                "{status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        // The watch's first event, over the same connection: the ConfigMap listed from 0.
        let first = tokio::time::timeout(Duration::from_secs(20), watch.body_mut().frame())
            .await
            .context("no watch event over HTTP/2")?
            .context("the watch ended")??;
        let data = first.into_data().map_err(|_| anyhow::anyhow!("not data"))?;
        let event: serde_json::Value =
            serde_json::from_slice(data.split(|b| *b == b'\n').next().unwrap_or_default())?;
        ensure!(
            event["type"] == "ADDED" && event["object"]["metadata"]["name"] == "a",
            "{event}"
        );
        Ok(())
    })?;
    println!("{AT_ONCE} gets and a watch over one HTTP/2 connection, as over HTTP/1.1");
    Ok(())
}

/// An HTTP/2 connection to the HTTPS proxy on `port`, trusting `ca`; and the protocol ALPN
/// settled on.
async fn connect(port: u16, ca: &std::path::Path) -> Result<(Sender, Option<Vec<u8>>)> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = ServerName::try_from("127.0.0.1")?.to_owned();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await?;
    let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    let (sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok((sender, alpn))
}

async fn send(sender: &Sender, path: &str) -> Result<http::Response<hyper::body::Incoming>> {
    let request = http::Request::get(format!("https://127.0.0.1{path}"))
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .header("accept", "application/json")
        .header("user-agent", "e2e-http2/v1")
        .body(Empty::new())?;
    let mut sender = sender.clone();
    sender.ready().await?;
    Ok(sender.send_request(request).await?)
}

/// Watches held open through the gateway at once, each needing a connection of its own
/// upstream over HTTP/1.1.
const WATCHES: usize = 12;

/// With `--upstream-http2`, kube-apiserver is spoken to over HTTP/2: 12 watches open at once
/// and 32 gets through the gateway ride at most three upstream connections (one per identity,
/// where HTTP/1.1 needs one per open watch: the same test without the flag counts at least
/// 12), each watch sees the change made after them; and an exec-style upgrade through the
/// apiserver's node proxy still switches, over HTTP/1.1.
pub fn upstream_http2_carries_the_nodes_requests_over_one_connection(env: &Env) -> Result<()> {
    let ns = namespace(&env.cluster, "up-h2")?;
    let mut counted = Vec::new();
    for http2 in [false, true] {
        let mut gateway = env.gateway(&[&format!("--upstream-http2={http2}")])?;
        let pid = gateway.process().context("the gateway runs")?.pid();
        let base = gateway.url();
        let name = format!("seen-{http2}");
        let upstream = runtime().block_on(async {
            let client = crate::support::client();
            let url = format!("{base}/api/v1/namespaces/{ns}/configmaps");
            let (status, list) = get(&client, &url).await?;
            ensure!(status == 200, "list: {status}");
            let list: serde_json::Value = serde_json::from_slice(&list)?;
            let version = list["metadata"]["resourceVersion"].as_str().unwrap_or("0");
            let watch_url = format!("{url}?watch=true&resourceVersion={version}");
            let mut watches = Vec::new();
            for _ in 0..WATCHES {
                watches.push(Watch::open(&client, &watch_url, "e2e-up-h2/v1").await?);
            }
            let gets = (0..AT_ONCE).map(|_| get(&client, &url));
            for answer in futures_util::future::join_all(gets).await {
                let (status, _) = answer?;
                ensure!(status == 200, "a get: {status}");
            }
            env.cluster
                .kubectl(&["create", "configmap", &name, "-n", &ns])?;
            for watch in &mut watches {
                watch
                    .wait_for("ADDED", &name, Duration::from_secs(30))
                    .await?;
            }
            // Counted while every watch is still open.
            edgegate_testkit::sockets::connections_to(pid, env.cluster.port)
        })?;
        counted.push(upstream);
        if http2 {
            let echoed = crate::upgrade_echo::tunnel(env, &gateway, &["ping\n"])?;
            ensure!(echoed == "ping\n", "echoed {echoed:?}");
        }
    }
    let (http1, http2) = (counted[0], counted[1]);
    ensure!(
        http1 >= WATCHES,
        "over HTTP/1.1, {WATCHES} open watches on {http1} upstream connections"
    );
    ensure!(
        http2 <= 3,
        "over HTTP/2, {WATCHES} open watches and {AT_ONCE} gets on {http2} upstream connections"
    );
    println!(
        "{WATCHES} open watches and {AT_ONCE} gets: {http1} upstream connections over HTTP/1.1, {http2} over HTTP/2"
    );
    Ok(())
}
