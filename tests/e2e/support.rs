//! What every end-to-end test shares: the control plane of the run, and async helpers to
//! talk HTTP to the gateway.

use std::path::PathBuf;
use std::sync::Arc;
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

    /// A gateway in front of the shared apiserver serving its HTTPS proxy too, with the
    /// cluster's serving certificate for the gateway; and that proxy's port.
    pub fn https_gateway(&self) -> Result<(Gateway, u16)> {
        let port = edgegate_testkit::process::free_port()?;
        let pki = &self.cluster.pki;
        let gateway = self.gateway(&[
            &format!("--proxy-secure-port={port}"),
            &format!("--tls-cert-file={}", pki.gateway_serving_cert.display()),
            &format!(
                "--tls-private-key-file={}",
                pki.gateway_serving_key.display()
            ),
        ])?;
        Ok((gateway, port))
    }
}

pub use edgegate_testkit::process::unique;

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

pub type Plain = Client<HttpConnector, http_body_util::combinators::BoxBody<Bytes, hyper::Error>>;

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

/// What client-go sends in `Accept`: protobuf first, JSON as a fallback.
pub const CLIENT_GO_ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";

/// GETs `url` as a client-go component would (its User-Agent, protobuf-first Accept, the
/// admin token); returns the status and the whole body.
pub async fn get_as(client: &Plain, url: &str, agent: &str) -> Result<(http::StatusCode, Bytes)> {
    get_accepting(client, url, agent, CLIENT_GO_ACCEPT).await
}

/// GETs `url` as `agent` (admin token) accepting `accept`; the status and the whole body.
pub async fn get_accepting(
    client: &Plain,
    url: &str,
    agent: &str,
    accept: &'static str,
) -> Result<(http::StatusCode, Bytes)> {
    let mut request = request(http::Method::GET, url, Some(ADMIN_TOKEN), agent, None)?;
    request
        .headers_mut()
        .insert("accept", http::HeaderValue::from_static(accept));
    let response = client.request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

/// Lists `url` as `agent`; returns the list's resourceVersion and its items.
pub async fn list_as(
    client: &Plain,
    url: &str,
    agent: &str,
) -> Result<(String, Vec<serde_json::Value>)> {
    let (status, body) = get_as(client, url, agent).await?;
    parse_list(url, agent, status, &body)
}

/// Lists `url` as `agent` asking for JSON only (as kubectl does); items as [`list_as`].
pub async fn list_json_as(
    client: &Plain,
    url: &str,
    agent: &str,
) -> Result<(String, Vec<serde_json::Value>)> {
    let (status, body) = get_accepting(client, url, agent, "application/json").await?;
    parse_list(url, agent, status, &body)
}

fn parse_list(
    url: &str,
    agent: &str,
    status: http::StatusCode,
    body: &Bytes,
) -> Result<(String, Vec<serde_json::Value>)> {
    if status != 200 {
        bail!(
            "list {url} as {agent} answered {status}: {}",
            String::from_utf8_lossy(body)
        );
    }
    let list: serde_json::Value = serde_json::from_slice(body).with_context(|| {
        let text = String::from_utf8_lossy(body);
        let tail = &text[text.len().saturating_sub(200)..];
        format!(
            "list {url} as {agent}: {} bytes that are not JSON: {:?} … {tail:?}",
            body.len(),
            &text[..text.len().min(200)]
        )
    })?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let items = list["items"].as_array().cloned().unwrap_or_default();
    Ok((rv, items))
}

/// `name → resourceVersion` of a list's items.
pub fn versions(items: &[serde_json::Value]) -> std::collections::BTreeMap<String, String> {
    items
        .iter()
        .map(|item| {
            (
                item["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                item["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

/// The sum of a metric's samples on the gateway's hub (all label sets).
pub fn metric(hub: std::net::SocketAddr, name: &str) -> Result<f64> {
    samples(hub, |series| {
        series
            .strip_prefix(name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('{'))
    })
}

/// A counter labelled by `place` (`child` or `gateway`), at each place: where the gateway
/// compiled filters or checked their configs.
pub fn by_place(hub: std::net::SocketAddr, name: &str) -> Result<(f64, f64)> {
    let at = |place: &str| metric_sample(hub, &format!("{name}{{place=\"{place}\"}}"));
    Ok((at("child")?, at("gateway")?))
}

/// One sample of the gateway's metrics, named with its labels as the hub prints it
/// (`name{label="value"}`); 0 when the hub prints no such sample.
pub fn metric_sample(hub: std::net::SocketAddr, series: &str) -> Result<f64> {
    samples(hub, |printed| printed == series)
}

/// The sum of the hub's samples whose series (name and labels) `wanted` picks.
fn samples(hub: std::net::SocketAddr, wanted: impl Fn(&str) -> bool) -> Result<f64> {
    let text = edgegate_testkit::http::get(hub, "/metrics")?.body;
    Ok(text
        .lines()
        .filter_map(|line| line.rsplit_once(' '))
        .filter(|(series, _)| wanted(series))
        .filter_map(|(_, value)| value.parse::<f64>().ok())
        .fold(0.0, |sum, v| sum + v))
}

/// Waits until the hub lists at least `at_least` cached sets of `component` (the gateway's
/// own lists, of yurt-hub-cfg, commit too: counting all commits would not tell).
pub fn wait_sets(hub: std::net::SocketAddr, component: &str, at_least: usize) -> Result<()> {
    edgegate_testkit::process::wait_until(Duration::from_secs(20), component, || {
        edgegate_testkit::http::get(hub, "/v1/cache").is_ok_and(|r| {
            serde_json::from_str::<Vec<serde_json::Value>>(&r.body).is_ok_and(|sets| {
                sets.iter().filter(|s| s["component"] == component).count() >= at_least
            })
        })
    })
}

/// Waits until `metric` reaches at least `at_least`.
pub fn wait_metric(hub: std::net::SocketAddr, name: &str, at_least: f64) -> Result<()> {
    edgegate_testkit::process::wait_until(Duration::from_secs(20), name, || {
        metric(hub, name).is_ok_and(|v| v >= at_least)
    })
}

/// Creates `count` ConfigMaps named `{prefix}-{i}` in `ns` through `gateway_url` as admin,
/// 32 at a time, each labelled `group={i % 2}`.
pub async fn create_configmaps(
    client: &Plain,
    gateway_url: &str,
    ns: &str,
    prefix: &str,
    count: usize,
) -> Result<()> {
    use futures_util::StreamExt;
    let url = format!("{gateway_url}/api/v1/namespaces/{ns}/configmaps");
    let creates = (0..count).map(|i| {
        let client = client.clone();
        let url = url.clone();
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{prefix}-{i}","labels":{{"group":"{}"}}}},"data":{{"index":"{i}","filler":"{}"}}}}"#,
            i % 2,
            "x".repeat(200)
        );
        async move {
            let response = client
                .request(request(http::Method::POST, &url, Some(ADMIN_TOKEN), "e2e/v1", Some(&body))?)
                .await?;
            let status = response.status();
            if status != 201 {
                let body = response.into_body().collect().await?.to_bytes();
                bail!("create answered {status}: {}", String::from_utf8_lossy(&body));
            }
            Ok(())
        }
    });
    let mut results = futures_util::stream::iter(creates).buffer_unordered(32);
    while let Some(result) = results.next().await {
        result?;
    }
    Ok(())
}

/// Applies a JSON manifest with kubectl, directly against the apiserver.
pub fn apply(cluster: &Cluster, dir: &std::path::Path, name: &str, json: &str) -> Result<()> {
    let file = dir.join(name);
    std::fs::write(&file, json)?;
    cluster.kubectl(&["apply", "-f", &file.display().to_string()])?;
    Ok(())
}

/// The names of a list's items.
pub fn names(items: &[serde_json::Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| {
            i["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Waits (up to 30 s) until the gateway's `/v1/readyz` answers `status`.
pub fn wait_readyz(gateway: &Gateway, status: u16, what: &str) -> Result<()> {
    edgegate_testkit::process::wait_until(Duration::from_secs(30), what, || {
        edgegate_testkit::http::get(gateway.hub, "/v1/readyz").is_ok_and(|r| r.status == status)
    })
}

/// A gateway in front of the shared apiserver through a relay the test can cut, probing
/// its upstream every second.
pub fn relayed_gateway(env: &Env) -> Result<(edgegate_testkit::Relay, Gateway)> {
    let relay = edgegate_testkit::Relay::start(([127, 0, 0, 1], env.cluster.port).into())?;
    let gateway = Gateway::start_to(
        &env.bin,
        &env.cluster,
        &relay.url(),
        &["--heartbeat-interval-seconds=1"],
    )?;
    Ok((relay, gateway))
}

/// A gateway on `cluster`'s credentials whose apiserver is `target` (the cluster's, or a
/// stand-in in front of it) through a relay the test can cut; waits until it is ready.
pub fn relayed_gateway_to(
    env: &Env,
    cluster: &Cluster,
    target: std::net::SocketAddr,
    flags: &[&str],
) -> Result<(edgegate_testkit::Relay, Gateway)> {
    let relay = edgegate_testkit::Relay::start(target)?;
    let gateway = Gateway::start_to(&env.bin, cluster, &relay.url(), flags)?;
    wait_readyz(&gateway, 200, "the gateway to be ready")?;
    Ok((relay, gateway))
}
