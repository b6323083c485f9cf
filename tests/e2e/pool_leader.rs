//! A pool's leader hub against a real apiserver, as OpenYurt's yurt-manager names it in
//! `kube-system/leader-hub-<pool>`: five gateways of one pool, each in a network namespace of
//! its own on one bridge (the pool's LAN) behind one WAN link to the cloud, the followers'
//! multiplexers fed from the leader's pool port, so the cloud holds one watch per pool-scope
//! resource for the whole pool; a node of another pool refused there; the WAN link cut and
//! back, the followers' clients answered throughout and the followers still on the leader;
//! the leader killed, the followers fed from the cloud, their clients' watches going on and
//! their lists answered throughout; then no leaders named, the old leader's health no longer
//! shown.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::cluster::ClusterOptions;
use edgegate_testkit::lan::Lan;
use edgegate_testkit::netns::LinkKind;
use edgegate_testkit::pool::{
    PoolNode, leader_config_map, let_nodes_in, node_identity, node_object, start_member,
};
use edgegate_testkit::process::{free_port, wait_until};
use edgegate_testkit::{Cluster, Gateway};

use crate::multiplexer::upstream_watches;
use crate::support::{Env, Watch, client, list_json_as, metric_sample, namespace};

const POOL: &str = "pool-1";
const AGENT: &str = "kube-proxy/v1.20.2 (linux/amd64) kubernetes/faecb19";
/// The pool's nodes: the leader and four followers.
const NODES: usize = 5;

fn service(ns: &str, name: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [{"port": 80}], "clusterIP": "None"},
    })
    .to_string()
}

/// Node `index`'s gateway, in its namespace of `lan`.
fn start(env: &Env, lan: &Lan, cluster: &Cluster, index: usize, port: u16) -> Result<Gateway> {
    let (name, ip) = (format!("edge-{index}"), lan.node_ip(index).to_string());
    let netns = lan.node_netns(index);
    let node = PoolNode {
        name: &name,
        pool: POOL,
        ip: &ip,
        port,
        netns: &netns,
    };
    start_member(
        &env.bin,
        cluster,
        &cluster.url(),
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
    let mut lan = Lan::create(NODES, &LinkKind::Lan)?;
    // The cloud listens on the host's end of the pool's WAN link.
    let options = ClusterOptions {
        address: lan.uplink.host_ip().into(),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with(&env.tools, env.etcd.clone(), options)?;
    // The harness stands on the pool's LAN, as the nodes' own clients do: it reaches the
    // gateways with the WAN cut, and the cloud over the WAN.
    let _site = lan.enter()?;
    let own = (
        upstream_watches(&cluster, "services")?,
        upstream_watches(&cluster, "endpointslices")?,
    );
    let_nodes_in(&cluster)?;
    for index in 0..NODES {
        cluster.apply(&node_object(&format!("edge-{index}"), POOL))?;
    }
    cluster.apply(&node_object("edge-x", "pool-2"))?;
    let port = free_port()?;
    let leader_ip = lan.node_ip(0);
    cluster.apply(&leader_config_map(POOL, &format!("edge-0/{leader_ip}")))?;
    let ns = namespace(&cluster, "pool")?;
    cluster.apply(&service(&ns, "before"))?;

    let mut leader = start(env, &lan, &cluster, 0, port)?;
    let mut followers = (1..NODES)
        .map(|index| start(env, &lan, &cluster, index, port))
        .collect::<Result<Vec<_>>>()?;
    cloud_holds(
        &cluster,
        own,
        (1, 1),
        Duration::from_secs(60),
        "one cloud watch per resource for the pool",
    )?;
    println!(
        "{NODES} gateways of one pool on one LAN: the cloud's watches (services, endpointslices): {:?}",
        held(&cluster, own)?
    );
    let rt = lan.uplink.runtime()?;
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
    let pool_port = format!("https://{leader_ip}:{port}");
    let raw = |name: &str, ip: &str, path: &str| -> Result<String> {
        let (kubeconfig, _) = node_identity(&cluster, name, ip, &pool_port)?;
        edgegate_testkit::cluster::kubectl(cluster.tools(), &kubeconfig, &["get", "--raw", path])
    };
    let member_ip = lan.node_ip(1).to_string();
    let member = raw("edge-1", &member_ip, "/api/v1/services")?;
    ensure!(member.contains("\"before\""), "a member's list: {member}");
    let outsider = raw("edge-x", "198.19.255.1", "/api/v1/services");
    let refused = format!("{outsider:?}");
    ensure!(
        outsider.is_err() && refused.contains("not of this node's pool"),
        "an outsider: {refused}"
    );
    let secrets = raw("edge-1", &member_ip, "/api/v1/secrets");
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

    // The WAN cut: the pool's clients are answered throughout, a follower restarted
    // meanwhile feeds from the leader again, and once the link is back the followers still
    // feed from the leader.
    lan.uplink.cut()?;
    ensure!(
        cluster.kubectl(&["get", "--raw", "/healthz"]).is_err(),
        "the cloud answers the site with its WAN link cut"
    );
    let (mut failed, mut lists) = (0, 0);
    let mut list_all = |gateways: &[&Gateway]| {
        for gateway in gateways {
            lists += 1;
            // Both Services made before the cut, whoever answers.
            let listed = rt.block_on(list_json_as(&client, &services(gateway), AGENT));
            if listed.is_ok_and(|(_, items)| items.len() == 2) {
                continue;
            }
            failed += 1;
        }
    };
    for round in 0..20 {
        let mut all: Vec<&Gateway> = followers.iter().collect();
        all.push(&leader);
        list_all(&all);
        if round == 5 {
            followers[0].restart()?;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    lan.uplink.restore()?;
    ensure!(
        failed == 0,
        "{failed} of {lists} lists through the pool's gateways failed with the WAN cut"
    );
    watches[0] = rt.block_on(Watch::open(
        &client,
        &format!("{}?watch=true", services(&followers[0])),
        AGENT,
    ))?;
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
            held(&cluster, own).is_ok_and(|held| held == (NODES as u64 - 1, NODES as u64 - 1))
        },
    );
    let failover = killed.elapsed();
    fed.with_context(|| format!("cloud watches {:?}", held(&cluster, own)))?;
    println!(
        "leader killed: the {} followers' feeds on the cloud after {failover:?}; {failed} of {lists} client lists failed meanwhile",
        NODES - 1
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
    let series = format!("edgegate_upstream_healthy{{server=\"https://{leader_ip}:{port}\"}}");
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
        (NODES as u64 - 1, NODES as u64 - 1),
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
        (NODES as u64 - 1, 0),
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
