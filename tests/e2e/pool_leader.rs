//! A pool's leader hub against a real apiserver, as OpenYurt's yurt-manager names it in
//! `kube-system/leader-hub-<pool>`: three gateways of one pool on loopback addresses of
//! their own, the followers' multiplexers fed from the leader's pool port, so the cloud holds
//! one watch per pool-scope resource for the whole pool; a node of another pool refused
//! there; the pool's WAN link cut and back, the followers' clients answered throughout and
//! the followers still on the leader; the leader killed, the followers fed from the cloud,
//! their clients' watches going on and their lists answered throughout; then no leaders
//! named, the old leader's health no longer shown.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::pool::{
    PoolNode, leader_config_map, let_nodes_in, node_identity, node_object, start_member,
};
use edgegate_testkit::process::{free_port, wait_until};
use edgegate_testkit::{Cluster, Gateway, Relay};

use crate::multiplexer::upstream_watches;
use crate::support::{Env, Watch, client, list_json_as, metric_sample, namespace, runtime};

const POOL: &str = "pool-1";
const AGENT: &str = "kube-proxy/v1.20.2 (linux/amd64) kubernetes/faecb19";

fn service(ns: &str, name: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [{"port": 80}], "clusterIP": "None"},
    })
    .to_string()
}

fn start(
    env: &Env,
    wan: &Relay,
    cluster: &Cluster,
    name: &str,
    ip: &str,
    port: u16,
) -> Result<Gateway> {
    let node = PoolNode {
        name,
        pool: POOL,
        ip,
        port,
    };
    start_member(
        &env.bin,
        cluster,
        &wan.url(),
        &node,
        &["--heartbeat-interval-seconds=1"],
    )
}

/// The cloud's watches of Services and EndpointSlices beyond the apiserver's own.
fn held(cluster: &Cluster, own: (u64, u64)) -> Result<(u64, u64)> {
    Ok((
        upstream_watches(cluster, "services")? - own.0,
        upstream_watches(cluster, "endpointslices")? - own.1,
    ))
}

/// Waits (up to `within`) until the cloud holds `expected` watches beyond its own.
fn cloud_holds(
    cluster: &Cluster,
    own: (u64, u64),
    expected: (u64, u64),
    within: Duration,
    what: &str,
) -> Result<()> {
    wait_until(within, what, || {
        held(cluster, own).is_ok_and(|held| held == expected)
    })
    .with_context(|| format!("cloud watches {:?}", held(cluster, own)))
}

pub fn followers_feed_from_their_leader_and_from_the_cloud_once_it_is_gone(
    env: &Env,
) -> Result<()> {
    let cluster = env.private_cluster()?;
    let own = (
        upstream_watches(&cluster, "services")?,
        upstream_watches(&cluster, "endpointslices")?,
    );
    let_nodes_in(&cluster)?;
    for (name, pool) in [
        ("edge-a", POOL),
        ("edge-b", POOL),
        ("edge-c", POOL),
        ("edge-x", "pool-2"),
    ] {
        cluster.apply(&node_object(name, pool))?;
    }
    let port = free_port()?;
    cluster.apply(&leader_config_map(POOL, "edge-a/127.0.0.2"))?;
    let ns = namespace(&cluster, "pool")?;
    cluster.apply(&service(&ns, "before"))?;

    // The pool's one WAN link.
    let wan = Relay::start(cluster.url().trim_start_matches("https://").parse()?)?;
    let mut leader = start(env, &wan, &cluster, "edge-a", "127.0.0.2", port)?;
    let followers = [
        start(env, &wan, &cluster, "edge-b", "127.0.0.3", port)?,
        start(env, &wan, &cluster, "edge-c", "127.0.0.4", port)?,
    ];
    cloud_holds(
        &cluster,
        own,
        (1, 1),
        Duration::from_secs(60),
        "one cloud watch per resource for the pool",
    )?;
    println!(
        "3 gateways of one pool: the cloud's watches (services, endpointslices): {:?}",
        held(&cluster, own)?
    );

    let rt = runtime();
    let client = client();
    let services = |gateway: &Gateway| format!("{}/api/v1/namespaces/{ns}/services", gateway.url());
    let mut watches = Vec::new();
    for follower in &followers {
        let (_, items) = rt.block_on(list_json_as(&client, &services(follower), AGENT))?;
        ensure!(
            items.len() == 1,
            "a follower lists {} Services",
            items.len()
        );
        let mut watch = rt.block_on(Watch::open(
            &client,
            &format!("{}?watch=true", services(follower)),
            AGENT,
        ))?;
        rt.block_on(watch.wait_for("ADDED", "before", Duration::from_secs(10)))?;
        watches.push(watch);
    }
    cluster.apply(&service(&ns, "led"))?;
    for watch in &mut watches {
        rt.block_on(watch.wait_for("ADDED", "led", Duration::from_secs(10)))?;
    }

    // The pool port serves the pool's nodes only, and only the pool-scope resources.
    let pool_port = format!("https://127.0.0.2:{port}");
    let raw = |name: &str, ip: &str, path: &str| -> Result<String> {
        let (kubeconfig, _) = node_identity(&cluster, name, ip, &pool_port)?;
        edgegate_testkit::cluster::kubectl(cluster.tools(), &kubeconfig, &["get", "--raw", path])
    };
    let member = raw("edge-b", "127.0.0.3", "/api/v1/services")?;
    ensure!(member.contains("\"before\""), "a member's list: {member}");
    let outsider = raw("edge-x", "127.0.0.9", "/api/v1/services");
    let refused = format!("{outsider:?}");
    ensure!(
        outsider.is_err() && refused.contains("not of this node's pool"),
        "an outsider: {refused}"
    );
    let secrets = raw("edge-b", "127.0.0.3", "/api/v1/secrets");
    ensure!(
        format!("{secrets:?}").contains("only lists and watches of the pool-scope"),
        "secrets: {secrets:?}"
    );

    // The leader counts what it served its followers, and what it refused.
    let served = |code: &str| {
        let series = format!(
            "edgegate_requests_total{{component=\"pool-followers\",verb=\"{{}}\",resource=\"services\",code=\"{code}\"}}"
        );
        ["list", "watch"]
            .iter()
            .map(|verb| metric_sample(leader.hub, &series.replace("{}", verb)).unwrap_or(0.0))
            .sum::<f64>()
    };
    ensure!(
        served("200") >= 2.0 && served("403") >= 1.0,
        "the leader's counts: 200 {}, 403 {}",
        served("200"),
        served("403")
    );

    // The WAN cut: the followers' clients are answered throughout, and once it is back the
    // followers still feed from the leader.
    wan.cut();
    let mut failed = 0;
    for _ in 0..20 {
        for follower in &followers {
            if rt
                .block_on(list_json_as(&client, &services(follower), AGENT))
                .is_err()
            {
                failed += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    wan.restore();
    ensure!(
        failed == 0,
        "{failed} of 40 lists through the followers failed with the WAN cut"
    );
    cluster.apply(&service(&ns, "healed"))?;
    for watch in &mut watches {
        rt.block_on(watch.wait_for("ADDED", "healed", Duration::from_secs(30)))
            .context("a follower's client watch after the WAN cut")?;
    }
    cloud_holds(
        &cluster,
        own,
        (1, 1),
        Duration::from_secs(30),
        "the pool's one cloud watch per resource again",
    )?;

    // The leader gone: the followers feed from the cloud; their clients notice nothing.
    let killed = Instant::now();
    leader.kill();
    let mut failed = 0;
    let mut lists = 0;
    let fed = wait_until(
        Duration::from_secs(30),
        "the followers' feeds on the cloud",
        || {
            for follower in &followers {
                lists += 1;
                if rt
                    .block_on(list_json_as(&client, &services(follower), AGENT))
                    .is_err()
                {
                    failed += 1;
                }
            }
            held(&cluster, own).is_ok_and(|held| held == (2, 2))
        },
    );
    let failover = killed.elapsed();
    fed.with_context(|| format!("cloud watches {:?}", held(&cluster, own)))?;
    println!(
        "leader killed: both followers' feeds on the cloud after {failover:?}; {failed} of {lists} client lists failed meanwhile"
    );
    ensure!(
        failed == 0,
        "{failed} of {lists} lists through the followers failed"
    );
    cluster.apply(&service(&ns, "after"))?;
    for watch in &mut watches {
        rt.block_on(watch.wait_for("ADDED", "after", Duration::from_secs(10)))
            .context("a follower's client watch, opened while the leader fed it")?;
    }

    // No leaders named any more: the followers stop checking the old leader, and its health
    // series is gone from their metrics rather than showing a server no longer followed.
    let series = format!("edgegate_upstream_healthy{{server=\"https://127.0.0.2:{port}\"}}");
    let shown = |gateway: &Gateway| {
        edgegate_testkit::http::get(gateway.hub, "/metrics").map(|r| r.body.contains(&series))
    };
    for follower in &followers {
        ensure!(shown(follower)?, "a follower shows no health of its leader");
    }
    cluster.apply(&leader_config_map(POOL, ""))?;
    wait_until(
        Duration::from_secs(30),
        "the old leader's health series gone from the followers",
        || followers.iter().all(|f| shown(f).is_ok_and(|shown| !shown)),
    )?;
    cloud_holds(
        &cluster,
        own,
        (2, 2),
        Duration::from_secs(30),
        "each follower feeding from the cloud once no leaders are named",
    )?;

    // The pool names Services alone as pool-scope (NodePool `poolScopeMetadata`, which
    // yurt-manager writes into the ConfigMap): the followers stop their EndpointSlices
    // feeds, and their clients' Services watches go on.
    cluster.apply(
        &serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("leader-hub-{POOL}"), "namespace": "kube-system"},
            "data": {"leaders": "", "enable-leader-election": "true",
                     "pool-scoped-metadata": "/v1/services"},
        })
        .to_string(),
    )?;
    cloud_holds(
        &cluster,
        own,
        (2, 0),
        Duration::from_secs(30),
        "the followers' EndpointSlices feeds stopped once the pool names Services alone",
    )?;
    cluster.apply(&service(&ns, "scoped"))?;
    for watch in &mut watches {
        rt.block_on(watch.wait_for("ADDED", "scoped", Duration::from_secs(10)))
            .context("a follower's client watch of Services, which stay pool-scope")?;
    }
    Ok(())
}
