//! The cloud of the traffic harness: N Services and N EndpointSlices (5–20 endpoints each,
//! addresses from 198.18.128.0/17) in the namespace `load`, and the churn that edits them
//! at a steady rate: one update in four a Service's annotation, the others an
//! EndpointSlice's endpoints (one address moved, one endpoint's readiness flipped), as a
//! rolling Deployment and the EndpointSlice controller make them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Result, bail};
use futures_util::StreamExt;
use http::Method;
use serde_json::{Value, json};

use super::kube::Client;

/// The namespace of the objects.
pub const NAMESPACE: &str = "load";

/// The node of the test bed, where one slice in ten has an endpoint.
const EDGE_NODE: &str = edgegate_testkit::testbed::NODE;

/// Creates the namespace, `n` Services and their EndpointSlices, 16 requests at a time;
/// those that exist already are left as they are.
pub async fn populate(client: &Client, n: usize) -> Result<()> {
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    create(client, "/api/v1/namespaces", &namespace).await?;
    let services = format!("/api/v1/namespaces/{NAMESPACE}/services");
    let slices = format!("/apis/discovery.k8s.io/v1beta1/namespaces/{NAMESPACE}/endpointslices");
    let requests = (0..n).flat_map(|i| [(&services, service(i)), (&slices, slice(i, 0))]);
    let mut results = futures_util::stream::iter(
        requests.map(|(path, body)| async move { create(client, path, &body).await }),
    )
    .buffer_unordered(16);
    while let Some(result) = results.next().await {
        result?;
    }
    Ok(())
}

/// Edits the objects at `per_second` updates a second until `stop`; how many it made.
pub async fn churn(
    client: &Client,
    n: usize,
    per_second: u32,
    stop: Arc<AtomicBool>,
) -> Result<u64> {
    let mut ticks =
        tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(per_second.max(1))));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut made = 0u64;
    while !stop.load(Ordering::Relaxed) {
        ticks.tick().await;
        made += 1;
        // A fixed odd stride walks every object before it comes back to one.
        let i = usize::try_from(made.wrapping_mul(7919) % n.max(1) as u64)?;
        let (path, patch) = if made.is_multiple_of(4) {
            let path = format!("/api/v1/namespaces/{NAMESPACE}/services/{}", name(i));
            let patch = json!({"metadata": {"annotations": {"load.edgegate.io/generation": made.to_string()}}});
            (path, patch)
        } else {
            let path = format!(
                "/apis/discovery.k8s.io/v1beta1/namespaces/{NAMESPACE}/endpointslices/{}-1",
                name(i)
            );
            (path, json!({"endpoints": slice(i, made)["endpoints"]}))
        };
        let (status, body) = client
            .send_json(Method::PATCH, &path, "application/merge-patch+json", &patch)
            .await?;
        if status != 200 {
            bail!("PATCH {path}: {status} {}", String::from_utf8_lossy(&body));
        }
    }
    Ok(made)
}

async fn create(client: &Client, path: &str, body: &Value) -> Result<()> {
    let (status, answer) = client
        .send_json(Method::POST, path, "application/json", body)
        .await?;
    // 409: it exists (an earlier run's, on an apiserver kept running).
    if status != 201 && status != 409 {
        bail!("POST {path}: {status} {}", String::from_utf8_lossy(&answer));
    }
    Ok(())
}

const TIERS: [&str; 3] = ["web", "api", "db"];

fn name(i: usize) -> String {
    format!("svc-{i:04}")
}

/// Service `i`: a ClusterIP Service without a selector (its slice is the harness's).
fn service(i: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name(i),
            "namespace": NAMESPACE,
            "labels": {"app": name(i), "tier": TIERS[i % 3]},
        },
        "spec": {
            "ports": [
                {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                {"name": "metrics", "port": 9090, "protocol": "TCP"},
            ],
        },
    })
}

/// Service `i`'s EndpointSlice at generation `generation`: 5–20 endpoints; from generation
/// 1 on, one endpoint's address moved and (every other generation) one not ready.
fn slice(i: usize, generation: u64) -> Value {
    let count = 5 + (i * 7) % 16;
    let changed = usize::try_from(generation % count as u64).unwrap_or(0);
    let endpoints: Vec<Value> = (0..count)
        .map(|j| {
            let mut index = i * 20 + j;
            if generation > 0 && j == changed {
                index += usize::try_from(generation).unwrap_or(0);
            }
            let index = index % 32768;
            let address = format!("198.18.{}.{}", 128 + index / 256, index % 256);
            let node = if j == 0 && i.is_multiple_of(10) {
                EDGE_NODE.to_owned()
            } else {
                format!("cloud-{}", (i + j) % 8)
            };
            let ready = !(generation % 2 == 1 && j == changed);
            json!({
                "addresses": [address],
                "conditions": {"ready": ready},
                "targetRef": {"kind": "Pod", "namespace": NAMESPACE, "name": format!("{}-{j}", name(i))},
                "topology": {"kubernetes.io/hostname": node},
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1beta1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": format!("{}-1", name(i)),
            "namespace": NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": name(i),
                "endpointslice.kubernetes.io/managed-by": "edgegate-load",
            },
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [
            {"name": "http", "port": 8080, "protocol": "TCP"},
            {"name": "metrics", "port": 9090, "protocol": "TCP"},
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_have_5_to_20_endpoints_in_the_test_range_and_change_by_one() {
        for i in 0..40 {
            let before = slice(i, 0)["endpoints"].as_array().unwrap().clone();
            assert!((5..=20).contains(&before.len()));
            for endpoint in &before {
                let address = endpoint["addresses"][0].as_str().unwrap();
                let octets: Vec<u8> = address.split('.').map(|o| o.parse().unwrap()).collect();
                assert_eq!(&octets[..2], &[198, 18]);
                assert!(octets[2] >= 128);
            }
            let after = slice(i, 3)["endpoints"].as_array().unwrap().clone();
            let differ = before.iter().zip(&after).filter(|(a, b)| a != b).count();
            assert_eq!(differ, 1);
        }
    }
}
