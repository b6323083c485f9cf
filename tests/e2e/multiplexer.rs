//! The node-level multiplexer against a real apiserver: after a restart without the cloud,
//! an open watch gets what changed meanwhile (YurtHub #2809 leaves it stale).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{Gateway, process::wait_until};

use crate::support::{Env, Watch, client, list_json_as, namespace, runtime, versions, wait_readyz};

/// The test cluster is Kubernetes 1.20: its EndpointSlices are `v1beta1`.
const GATEWAY_FLAGS: &[&str] = &[
    "--heartbeat-interval-seconds=1",
    "--pool-scope-resources=/v1/services,discovery.k8s.io/v1beta1/endpointslices",
];

const AGENTS: [&str; 4] = [
    "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19",
    "kube-proxy/v1.20.2 (linux/amd64) kubernetes/faecb19",
    "coredns/v1.8.0 (linux/amd64) kubernetes/faecb19",
    "flanneld/v0.14.0 (linux/amd64) kubernetes/faecb19",
];

fn service(ns: &str, name: &str, tier: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": {"tier": tier}},
        "spec": {"ports": [{"port": 80}], "clusterIP": "None"},
    })
    .to_string()
}

/// Lists `url` until it holds `count` items; its resourceVersion and items.
fn wait_until_listed(
    rt: &tokio::runtime::Runtime,
    client: &crate::support::Plain,
    url: &str,
    count: usize,
) -> Result<(String, Vec<serde_json::Value>)> {
    let mut found = None;
    wait_until(Duration::from_secs(20), "the shared list", || {
        found = rt
            .block_on(list_json_as(client, url, AGENTS[0]))
            .ok()
            .filter(|(_, items)| items.len() == count);
        found.is_some()
    })?;
    found.context("listed")
}

pub fn after_a_restart_without_the_cloud_an_open_watch_gets_what_changed(env: &Env) -> Result<()> {
    let cluster = env.private_cluster()?;
    let mut gateway = Gateway::start(&env.bin, &cluster, GATEWAY_FLAGS)?;
    let ns = namespace(&cluster, "mux-reboot")?;
    for name in ["kept", "changed", "gone"] {
        cluster.apply(&service(&ns, name, "front"))?;
    }
    let rt = runtime();
    let client = client();
    let services = format!("{}/api/v1/namespaces/{ns}/services", gateway.url());
    wait_until_listed(&rt, &client, &services, 3)?;
    // The feed's list and watch are persisted: wait for its set.
    wait_until(
        Duration::from_secs(20),
        "the shared state persisted",
        || {
            edgegate_testkit::http::get(gateway.hub, "/v1/cache").is_ok_and(|r| {
                r.body.contains("\"component\":\"edgegate\"") && r.body.contains("services")
            })
        },
    )?;

    // Stopped; meanwhile the cloud changes; restarted while the cloud is away.
    gateway.stop(Duration::from_secs(5));
    cluster.apply(&service(&ns, "changed", "back"))?;
    cluster.kubectl(&["delete", "service", "-n", &ns, "gone"])?;
    cluster.stop_apiserver()?;
    gateway.restart()?;
    wait_readyz(&gateway, 503, "the restarted gateway sees no apiserver")?;
    let (version, stale) = wait_until_listed(&rt, &client, &services, 3)?;
    println!(
        "offline after the restart: {} services at {version}",
        stale.len()
    );
    let url = format!("{services}?watch=true&resourceVersion={version}");
    let mut watch = rt.block_on(Watch::open(&client, &url, AGENTS[1]))?;

    cluster.start_apiserver()?;
    rt.block_on(watch.wait_for("DELETED", "gone", Duration::from_secs(60)))
        .context("the deletion made while the gateway was down reaches the open watch")?;
    let (_, now) = rt.block_on(list_json_as(&client, &services, AGENTS[1]))?;
    let direct: serde_json::Value =
        serde_json::from_str(&cluster.kubectl(&["get", "services", "-n", &ns, "-o", "json"])?)?;
    ensure!(
        versions(&now) == versions(direct["items"].as_array().context("items")?),
        "after the cloud came back the shared list differs from the apiserver's"
    );
    Ok(())
}
