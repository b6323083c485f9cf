//! The cloud side of a flapping link: the objects the reflectors watch, the churn that
//! changes them while the link flaps, and what the cloud holds afterwards; all straight to
//! the apiserver through an admin proxy (a gateway the link does not cross).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::ADMIN_TOKEN;

/// The ConfigMaps the reflectors watch (`cm-0`…), besides those the churn adds.
pub const CONFIGMAPS: usize = 60;
/// The Services the reflectors watch (`svc-0`…).
pub const SERVICES: usize = 10;
/// Changes the cloud makes a second while the link flaps.
pub const CHURN_PER_SECOND: u64 = 20;

/// A plain-HTTP client.
pub type Plain = Client<HttpConnector, http_body_util::Full<Bytes>>;

/// A runtime for the cloud's side, in the caller's network.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// A plain-HTTP client with a pool large enough for the churn.
pub fn plain() -> Plain {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(64)
        .build_http()
}

/// Sends `method url` as admin with `body` (JSON, or a merge patch for `PATCH`); the
/// status and the whole body.
pub async fn send(
    client: &Plain,
    method: http::Method,
    url: &str,
    body: Option<&str>,
) -> Result<(http::StatusCode, Bytes)> {
    let content_type = if method == http::Method::PATCH {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let request = http::Request::builder()
        .method(method)
        .uri(url)
        .header("user-agent", "e2e/v1")
        .header("accept", "application/json")
        .header("content-type", content_type)
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .body(Full::new(Bytes::from(body.unwrap_or_default().to_owned())))?;
    let response = client.request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

/// Sends as [`send`] and fails unless the answer is a success.
async fn change(client: &Plain, method: http::Method, url: &str, body: Option<&str>) -> Result<()> {
    let (status, answer) = send(client, method, url, body).await?;
    ensure!(
        status.is_success(),
        "{url}: {status} {}",
        String::from_utf8_lossy(&answer)
    );
    Ok(())
}

/// Creates ConfigMap `name` in `ns`.
async fn create_configmap(client: &Plain, admin: &str, ns: &str, name: &str) -> Result<()> {
    let url = format!("{admin}/api/v1/namespaces/{ns}/configmaps");
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"filler":"{}"}}}}"#,
        "x".repeat(200)
    );
    change(client, http::Method::POST, &url, Some(&body)).await
}

/// Creates the watched objects in `ns`: [`CONFIGMAPS`] ConfigMaps and [`SERVICES`] Services.
pub async fn seed(client: &Plain, admin: &str, ns: &str) -> Result<()> {
    for i in 0..CONFIGMAPS {
        create_configmap(client, admin, ns, &format!("cm-{i}")).await?;
    }
    for i in 0..SERVICES {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"svc-{i}"}},"spec":{{"ports":[{{"port":80}}]}}}}"#
        );
        let url = format!("{admin}/api/v1/namespaces/{ns}/services");
        change(client, http::Method::POST, &url, Some(&body)).await?;
    }
    Ok(())
}

/// Changes ConfigMaps and Services of `ns` through `admin` until `stop`: 20 a second, every
/// tenth a ConfigMap created and the one created ten changes before deleted, every tenth
/// (offset) a Service annotated, the others ConfigMaps patched. The number of changes.
pub async fn churn(client: Plain, admin: String, ns: String, stop: Arc<AtomicBool>) -> Result<u64> {
    let mut changes = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / CHURN_PER_SECOND));
    while !stop.load(Ordering::SeqCst) {
        tick.tick().await;
        let n = changes as usize;
        if n % 10 == 9 {
            // A ConfigMap comes, and the one that came ten changes ago goes.
            create_configmap(&client, &admin, &ns, &format!("new{n}-0")).await?;
            changes += 1;
            if n < 19 {
                continue;
            }
        }
        let (method, url, body) = if n % 10 == 9 {
            let url = format!("{admin}/api/v1/namespaces/{ns}/configmaps/new{}-0", n - 10);
            (http::Method::DELETE, url, None)
        } else if n % 10 == 4 {
            let url = format!(
                "{admin}/api/v1/namespaces/{ns}/services/svc-{}",
                n % SERVICES
            );
            let body = format!(r#"{{"metadata":{{"annotations":{{"churn":"{n}"}}}}}}"#);
            (http::Method::PATCH, url, Some(body))
        } else {
            let url = format!(
                "{admin}/api/v1/namespaces/{ns}/configmaps/cm-{}",
                n % CONFIGMAPS
            );
            let body = format!(r#"{{"data":{{"churn":"{n}"}}}}"#);
            (http::Method::PATCH, url, Some(body))
        };
        change(&client, method, &url, body.as_deref()).await?;
        changes += 1;
    }
    Ok(changes)
}

/// `kind/name → resourceVersion` of the ConfigMaps and Services of `ns` in the cloud.
pub async fn truth(client: &Plain, admin: &str, ns: &str) -> Result<BTreeMap<String, u64>> {
    let mut truth = BTreeMap::new();
    for (kind, plural) in [("ConfigMap", "configmaps"), ("Service", "services")] {
        let url = format!("{admin}/api/v1/namespaces/{ns}/{plural}");
        let (status, body) = send(client, http::Method::GET, &url, None).await?;
        ensure!(status == 200, "{plural}: {status}");
        let list: serde_json::Value = serde_json::from_slice(&body)?;
        for item in list["items"].as_array().context("a list")? {
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            let rv = item["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|rv| rv.parse().ok())
                .unwrap_or_default();
            truth.insert(format!("{kind}/{name}"), rv);
        }
    }
    Ok(truth)
}
