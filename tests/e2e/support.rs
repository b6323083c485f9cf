//! What every end-to-end test shares: the control plane of the run, and async helpers to
//! talk HTTP to the gateway.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::{Bytes, BytesMut};
use edgegate_testkit::{ADMIN_TOKEN, Cluster, Etcd, Gateway, Toolchain};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// The control plane of this test run: one etcd, one shared apiserver, the gateway binary.
pub struct Env {
    /// The binaries.
    pub tools: Toolchain,
    /// The etcd every apiserver of the run stores into (each under its own prefix).
    pub etcd: Arc<Etcd>,
    /// The apiserver shared by tests that do not stop it.
    pub cluster: Cluster,
    /// The `edgegate` binary under test.
    pub bin: PathBuf,
}

impl Env {
    /// Provisions the binaries and starts etcd and the shared apiserver.
    pub fn start() -> Result<Env> {
        let tools = Toolchain::provision()?;
        let etcd = Arc::new(Etcd::start(&tools)?);
        let cluster = Cluster::start(&tools, etcd.clone())?;
        Ok(Env {
            tools,
            etcd,
            cluster,
            bin: PathBuf::from(env!("CARGO_BIN_EXE_edgegate")),
        })
    }

    /// An apiserver of the test's own, for tests that stop and start it.
    pub fn private_cluster(&self) -> Result<Cluster> {
        Cluster::start(&self.tools, self.etcd.clone())
    }

    /// A gateway in front of the shared apiserver.
    pub fn gateway(&self, extra: &[&str]) -> Result<Gateway> {
        Gateway::start(&self.bin, &self.cluster, extra)
    }
}

/// A name no other test of this run uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a namespace of the test's own through the apiserver directly.
pub fn namespace(cluster: &Cluster, prefix: &str) -> Result<String> {
    let name = unique(prefix);
    cluster.kubectl(&["create", "namespace", &name])?;
    Ok(name)
}

/// A tokio runtime for one test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime can be built")
}

type Plain = Client<HttpConnector, http_body_util::combinators::BoxBody<Bytes, hyper::Error>>;

/// A plain-HTTP client for talking to the gateway, with a pool large enough for the
/// concurrency tests.
pub fn client() -> Plain {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(256)
        .build_http()
}

/// Builds a request to `url` with the admin token unless `token` says otherwise.
pub fn request(
    method: http::Method,
    url: &str,
    token: Option<&str>,
    agent: &str,
    body: Option<&str>,
) -> Result<http::Request<http_body_util::combinators::BoxBody<Bytes, hyper::Error>>> {
    let mut builder = http::Request::builder()
        .method(method)
        .uri(url)
        .header("user-agent", agent)
        .header("accept", "application/json");
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    let body = match body {
        Some(text) => {
            builder = builder.header("content-type", "application/json");
            Full::new(Bytes::from(text.to_owned()))
                .map_err(|never| match never {})
                .boxed()
        }
        None => Empty::new().map_err(|never| match never {}).boxed(),
    };
    Ok(builder.body(body)?)
}

/// GETs `url` as admin and returns the status and the whole body.
pub async fn get(client: &Plain, url: &str) -> Result<(http::StatusCode, Bytes)> {
    let response = client
        .request(request(
            http::Method::GET,
            url,
            Some(ADMIN_TOKEN),
            "e2e/v1",
            None,
        )?)
        .await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

/// A watch response read one event (one JSON line) at a time.
pub struct Watch {
    body: Incoming,
    buffer: BytesMut,
}

impl Watch {
    /// Opens a watch at `url` (which must carry `watch=true`) as admin.
    pub async fn open(client: &Plain, url: &str, agent: &str) -> Result<Watch> {
        let response = client
            .request(request(
                http::Method::GET,
                url,
                Some(ADMIN_TOKEN),
                agent,
                None,
            )?)
            .await?;
        if response.status() != 200 {
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            bail!(
                "watch {url} answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(Watch {
            body: response.into_body(),
            buffer: BytesMut::new(),
        })
    }

    /// The next event, or `None` when the stream ends; fails if none arrives in `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<serde_json::Value>> {
        tokio::time::timeout(timeout, self.next_event())
            .await
            .context("no watch event in time")?
    }

    async fn next_event(&mut self) -> Result<Option<serde_json::Value>> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line = self.buffer.split_to(end + 1);
                if line.len() > 1 {
                    return Ok(Some(serde_json::from_slice(&line)?));
                }
                continue;
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(frame) => {
                    if let Ok(data) = frame?.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }

    /// Reads events until one of `kind` for an object named `name` arrives.
    pub async fn wait_for(
        &mut self,
        kind: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<serde_json::Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let event = self
                .next(left)
                .await
                .with_context(|| format!("waiting for {kind} {name}"))?
                .with_context(|| format!("watch ended before {kind} {name}"))?;
            if event["type"] == kind && event["object"]["metadata"]["name"] == name {
                return Ok(event);
            }
        }
    }
}
