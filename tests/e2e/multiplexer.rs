//! The node-level multiplexer against a real apiserver: the node's clients share one
//! upstream watch per pool-scope resource, each gets its own selection and versions, their
//! watches outlive the cloud's loss, and after a restart without the cloud an open watch
//! gets what changed meanwhile (YurtHub #2809 leaves it stale).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{Cluster, Gateway, process::wait_until};

use crate::support::{Env, Watch, client, list_json_as, namespace, runtime, versions, wait_readyz};

/// The test cluster is Kubernetes 1.20: its EndpointSlices are `v1beta1`.
const GATEWAY_FLAGS: &[&str] = &[
    "--heartbeat-interval-seconds=1",
    "--pool-scope-resources=/v1/services,discovery.k8s.io/v1beta1/endpointslices",
];

/// Watches of Services and of EndpointSlices the test opens through the gateway.
const WATCHES: usize = 12;

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

/// The apiserver's count of open watches of `resource` (the apiserver is the test's own:
/// they are this test's gateway's and the apiserver's own informers').
pub fn upstream_watches(cluster: &Cluster, resource: &str) -> Result<u64> {
    let metrics = cluster.kubectl(&["get", "--raw", "/metrics"])?;
    let series = "apiserver_longrunning_gauge{";
    Ok(metrics
        .lines()
        .filter(|l| l.starts_with(series))
        .filter(|l| l.contains(&format!("resource=\"{resource}\"")) && l.contains("verb=\"WATCH\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

pub fn node_clients_share_one_upstream_watch_per_resource(env: &Env) -> Result<()> {
    let cluster = env.private_cluster()?;
    // kube-apiserver watches Services itself (its aggregator's availability controller).
    let own = (
        upstream_watches(&cluster, "services")?,
        upstream_watches(&cluster, "endpointslices")?,
    );
    let gateway = Gateway::start(&env.bin, &cluster, GATEWAY_FLAGS)?;
    let ns = namespace(&cluster, "mux")?;
    for i in 0..6 {
        let tier = if i % 2 == 0 { "front" } else { "back" };
        cluster.apply(&service(&ns, &format!("s{i}"), tier))?;
    }
    let rt = runtime();
    let client = client();
    let services = format!("{}/api/v1/namespaces/{ns}/services", gateway.url());
    let slices = format!(
        "{}/apis/discovery.k8s.io/v1beta1/endpointslices",
        gateway.url()
    );

    // Lists, as client-go reflectors start, answered from the shared state once it holds one.
    let (_, list) = wait_until_listed(&rt, &client, &services, 6)?;
    let direct: serde_json::Value =
        serde_json::from_str(&cluster.kubectl(&["get", "services", "-n", &ns, "-o", "json"])?)?;
    ensure!(
        versions(&list) == versions(direct["items"].as_array().context("items")?),
        "the shared list differs from the apiserver's"
    );

    let mut watches = Vec::new();
    for i in 0..WATCHES {
        let agent = AGENTS[i % AGENTS.len()];
        let url = match i % 3 {
            0 => {
                format!("{services}?watch=true&labelSelector=tier%3Dfront&allowWatchBookmarks=true")
            }
            1 => format!("{services}?watch=true"),
            _ => format!("{slices}?watch=true"),
        };
        watches.push((i % 3, rt.block_on(Watch::open(&client, &url, agent))?));
    }
    // Each started with what its selection holds.
    for (kind, watch) in &mut watches {
        let expected = match kind {
            0 => 3,
            1 => 6,
            _ => 0,
        };
        for _ in 0..expected {
            let event = rt
                .block_on(watch.next(Duration::from_secs(10)))?
                .context("ended")?;
            ensure!(event["type"] == "ADDED", "{event}");
        }
    }
    let held = (
        upstream_watches(&cluster, "services")? - own.0,
        upstream_watches(&cluster, "endpointslices")? - own.1,
    );
    println!(
        "{WATCHES} watches through the gateway; its upstream watches (services, endpointslices): {held:?}"
    );
    ensure!(
        held == (1, 1),
        "upstream watches {held:?} for {WATCHES} local ones"
    );

    // A label change moves a Service into one selection and out of none; a deletion.
    cluster.apply(&service(&ns, "s1", "front"))?;
    cluster.kubectl(&["delete", "service", "-n", &ns, "s0"])?;
    for (kind, watch) in &mut watches {
        match kind {
            0 => {
                rt.block_on(watch.wait_for("ADDED", "s1", Duration::from_secs(10)))?;
                rt.block_on(watch.wait_for("DELETED", "s0", Duration::from_secs(10)))?;
            }
            1 => {
                rt.block_on(watch.wait_for("MODIFIED", "s1", Duration::from_secs(10)))?;
                rt.block_on(watch.wait_for("DELETED", "s0", Duration::from_secs(10)))?;
            }
            _ => {}
        }
    }

    // The cloud goes: the watches stay open, and go on when it is back.
    cluster.stop_apiserver()?;
    wait_readyz(&gateway, 503, "the gateway sees the apiserver gone")?;
    let (_, offline) = rt.block_on(list_json_as(&client, &services, AGENTS[1]))?;
    ensure!(offline.len() == 5, "offline list: {} items", offline.len());
    cluster.start_apiserver()?;
    wait_readyz(&gateway, 200, "the gateway sees the apiserver back")?;
    cluster.apply(&service(&ns, "s9", "front"))?;
    for (kind, watch) in &mut watches {
        if *kind != 2 {
            rt.block_on(watch.wait_for("ADDED", "s9", Duration::from_secs(20)))
                .context("a watch opened before the outage gets a change made after it")?;
        }
    }
    Ok(())
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
