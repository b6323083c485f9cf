//! `discovery.k8s.io/v1` EndpointSlices, the gateway's default pool-scope resource, end to
//! end: a gateway with the default `--pool-scope-resources` and filters in front of
//! [`StandIn`] (what a 1.21+ apiserver serves of them, made from the real 1.20 apiserver's
//! v1beta1 answers), beside a gateway overridden to `v1beta1` in front of the real
//! apiserver. kube-proxy's lists and watches through each multiplexer, filtered by
//! servicetopology, must be the same slices once the v1beta1 ones are converted: online, as
//! the cloud changes, offline, and after a restart while offline (from the cache).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::process::{free_port, wait_until};
use edgegate_testkit::standin_json::value_to_v1;
use edgegate_testkit::{Cluster, Gateway, Relay, StandIn};
use serde_json::{Value, json};

use crate::support::{
    Env, Plain, Watch, apply, client, list_as, metric_sample, relayed_gateway_to, wait_readyz,
};
use crate::topology::{KUBE_PROXY, endpoints, filter_dir, nodes_and_pools, services_and_slices};

/// kube-proxy's filters.
const FILTERS: [&str; 4] = [
    "servicetopology",
    "forwardkubesvctraffic",
    "discard-cloud-service",
    "nodeportisolation",
];

/// What the gateway logs when it cannot read a protobuf watch and asks for JSON instead.
const JSON_FALLBACK: &str = "watching it as JSON from now on";

/// `slice name → the first address of each endpoint kept` in the test's namespace.
type View = BTreeMap<String, Vec<String>>;

/// The two gateways on node `edge-1`, each behind a relay the test cuts: `[v1, v1beta1]`.
struct Sides {
    sides: [(Relay, Gateway, String); 2],
    rt: tokio::runtime::Runtime,
    client: Plain,
}

impl Sides {
    fn start(env: &Env, cluster: &Cluster, standin: &StandIn) -> Result<Sides> {
        let real = ([127, 0, 0, 1], cluster.port).into();
        let side = |target, v: &str| -> Result<(Relay, Gateway, String)> {
            let filters = filter_dir(&cluster.dir.join(format!("filters-{v}")), &FILTERS)?;
            let pki = &cluster.pki;
            let mut flags = vec![
                format!("--filter-dir={}", filters.display()),
                "--node-name=edge-1".to_owned(),
                "--heartbeat-interval-seconds=1".to_owned(),
                format!("--proxy-secure-port={}", free_port()?),
                format!("--tls-cert-file={}", pki.gateway_serving_cert.display()),
                format!(
                    "--tls-private-key-file={}",
                    pki.gateway_serving_key.display()
                ),
            ];
            if v == "v1beta1" {
                let scope = "/v1/services,discovery.k8s.io/v1beta1/endpointslices";
                flags.push(format!("--pool-scope-resources={scope}"));
            }
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            let (relay, gateway) = relayed_gateway_to(env, cluster, target, &flags)?;
            let slices = format!("{}/apis/discovery.k8s.io/{v}/endpointslices", gateway.url());
            Ok((relay, gateway, slices))
        };
        let sides = [side(standin.addr, "v1")?, side(real, "v1beta1")?];
        let rt = crate::support::runtime();
        Ok(Sides {
            sides,
            rt,
            client: client(),
        })
    }

    fn v1(&self) -> &Gateway {
        &self.sides[0].1
    }

    fn list(&self, side: usize) -> Result<(String, Vec<Value>)> {
        let url = &self.sides[side].2;
        self.rt.block_on(list_as(&self.client, url, KUBE_PROXY))
    }

    /// kube-proxy's v1 list once it is the v1beta1 one converted and `ns` in it is `want`;
    /// fails, saying what it saw, if that does not come within 30 s.
    fn agreed(&self, ns: &str, want: &View) -> Result<Vec<Value>> {
        let (mut seen, mut why) = (Vec::new(), String::new());
        wait_until(
            Duration::from_secs(30),
            "both sides' kube-proxy views",
            || {
                let (Ok((_, v1)), Ok((_, beta))) = (self.list(0), self.list(1)) else {
                    return false;
                };
                let mine: Vec<Value> = v1
                    .iter()
                    .filter(|s| s["metadata"]["namespace"] == ns)
                    .cloned()
                    .collect();
                let same = beta
                    .iter()
                    .map(value_to_v1)
                    .collect::<Result<Vec<_>>>()
                    .is_ok_and(|b| b == v1);
                why = format!(
                    "v1: {:?}; the v1beta1 one converted: {same}",
                    endpoints(&mine)
                );
                seen = v1;
                same && endpoints(&mine) == *want
            },
        )
        .with_context(|| why.clone())?;
        Ok(seen)
    }

    /// A kube-proxy watch on each side from its list's version.
    fn watches(&self) -> Result<[Watch; 2]> {
        let open = |side: usize| -> Result<Watch> {
            let (rv, _) = self.list(side)?;
            let url = format!("{}?watch=true&resourceVersion={rv}", self.sides[side].2);
            self.rt
                .block_on(Watch::open(&self.client, &url, KUBE_PROXY))
        };
        Ok([open(0)?, open(1)?])
    }

    /// Each watch's events of `ns` up to DELETED `last`; fails unless the v1 ones are the
    /// v1beta1 ones converted. Their `TYPE name`s.
    fn same_events(&self, watches: &mut [Watch; 2], ns: &str, last: &str) -> Result<Vec<String>> {
        let mut got = [Vec::new(), Vec::new()];
        for (watch, events) in watches.iter_mut().zip(&mut got) {
            loop {
                let event = self
                    .rt
                    .block_on(watch.next(Duration::from_secs(30)))?
                    .context("the watch ended")?;
                let meta = &event["object"]["metadata"];
                if meta["namespace"] != ns {
                    continue;
                }
                let done = event["type"] == "DELETED" && meta["name"] == last;
                events.push(event);
                if done {
                    break;
                }
            }
        }
        let [v1, beta] = got;
        let converted = beta
            .iter()
            .map(|e| Ok(json!({"type": e["type"], "object": value_to_v1(&e["object"])?})))
            .collect::<Result<Vec<_>>>()?;
        ensure!(
            v1 == converted,
            "v1 events {v1:?}\nv1beta1 events converted {converted:?}"
        );
        let name = |e: &Value| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap_or_default(),
                e["object"]["metadata"]["name"].as_str().unwrap_or_default()
            )
        };
        Ok(v1.iter().map(name).collect())
    }

    fn cut(&self, cut: bool) -> Result<()> {
        for (relay, gateway, _) in &self.sides {
            match cut {
                true => relay.cut(),
                false => relay.restore(),
            }
            let status = if cut { 503 } else { 200 };
            wait_readyz(gateway, status, "the gateway to see the link")?;
        }
        Ok(())
    }
}

/// Slices written through v1beta1 whose topology holds all v1 moves: a hostname, a zone, a
/// key of its own; endpoints on each node, on none, not ready, with only a zone.
fn rich_slices(ns: &str, services: &[&str], suffix: &str, first: &str) -> String {
    let topology = |node: &str, zone: &str| json!({"kubernetes.io/hostname": node, "topology.kubernetes.io/zone": zone, "example.com/rack": "r1"});
    let slice = |service: &&str| {
        json!({
            "apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{service}-{suffix}"), "namespace": ns, "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": [first], "conditions": {"ready": true}, "hostname": "web-1",
                 "targetRef": {"kind": "Pod", "namespace": ns, "name": "web-1"}, "topology": topology("edge-1", "zone-a")},
                {"addresses": ["10.0.7.2"], "conditions": {"ready": false}, "topology": topology("edge-2", "zone-a")},
                {"addresses": ["10.0.7.3"], "topology": {"kubernetes.io/hostname": "edge-3", "topology.kubernetes.io/zone": "zone-b"}},
                {"addresses": ["10.0.7.4"]},
                {"addresses": ["10.0.7.5"], "topology": {"topology.kubernetes.io/zone": "zone-b"}},
            ],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        })
    };
    let items: Vec<Value> = services.iter().map(slice).collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

fn view(want: &[(&str, &[&str])]) -> View {
    let ips = |ips: &[&str]| ips.iter().map(|ip| (*ip).to_owned()).collect();
    want.iter()
        .map(|(name, kept)| ((*name).to_owned(), ips(kept)))
        .collect()
}

/// What the v1 side's slices hold, read without the stand-in's converter.
fn v1_as_kube_apiserver_converts(v1: &[Value], ns: &str) -> Result<()> {
    let endpoint = |name: &str, i: usize| {
        v1.iter()
            .find(|s| s["metadata"]["name"] == name)
            .map(|s| s["endpoints"][i].clone())
    };
    let first = endpoint("by-pool-z", 0).context("by-pool-z")?;
    let expected = json!({"addresses": ["10.0.7.1"], "conditions": {"ready": true}, "hostname": "web-1",
        "targetRef": {"kind": "Pod", "namespace": ns, "name": "web-1"},
        "deprecatedTopology": {"example.com/rack": "r1"}, "nodeName": "edge-1", "zone": "zone-a"});
    ensure!(
        first == expected,
        "by-pool-z's first endpoint in v1: {first}"
    );
    let zone_only = endpoint("plain-z", 4).context("plain-z")?;
    ensure!(
        zone_only == json!({"addresses": ["10.0.7.5"], "conditions": {}, "zone": "zone-b"}),
        "{zone_only}"
    );
    let endpoints = |s: &Value| s["endpoints"].as_array().cloned().unwrap_or_default();
    let topology = v1
        .iter()
        .flat_map(endpoints)
        .any(|e| e.get("topology").is_some());
    ensure!(
        v1.iter().all(|s| s["apiVersion"] == "discovery.k8s.io/v1") && !topology,
        "{v1:?}"
    );
    Ok(())
}

/// kube-proxy on `edge-1` (pool `hangzhou`: edge-1, edge-2) lists and watches EndpointSlices
/// through the multiplexer of each side: the v1 side's answers are the v1beta1 side's,
/// converted, servicetopology keeping the same endpoints on both; online, as the cloud
/// changes, offline, restarted offline, and when the cloud is back. The v1 side's feed
/// watched in protobuf, transcoded by the gateway, and never fell back to JSON.
pub fn kube_proxy_sees_on_v1_what_v1beta1_shows(env: &Env) -> Result<()> {
    let cluster = env.private_cluster()?;
    let scratch = cluster.dir.join("slices-v1");
    std::fs::create_dir_all(&scratch)?;
    let nodes = ["edge-1", "edge-2", "edge-3"];
    nodes_and_pools(&cluster, &scratch, nodes)?;
    let ns = crate::support::namespace(&cluster, "slices-v1")?;
    services_and_slices(&cluster, &scratch, &ns, nodes)?;
    let rich = rich_slices(&ns, &["by-node", "by-pool", "plain"], "z", "10.0.7.1");
    apply(&cluster, &scratch, "rich.json", &rich)?;
    let standin = StandIn::start(&cluster)?;
    let mut sides = Sides::start(env, &cluster, &standin)?;
    let fell_back = |sides: &Sides| sides.v1().log_tail(usize::MAX).contains(JSON_FALLBACK);

    // Discovery through the v1 side advertises v1, and kubectl reads v1 objects there.
    let versions = sides.v1().kubectl(&["api-versions"])?;
    ensure!(
        versions.lines().any(|l| l == "discovery.k8s.io/v1"),
        "{versions}"
    );
    let listed = sides
        .v1()
        .kubectl(&["get", "endpointslices", "-n", &ns, "-o", "json"])?;
    let listed: Value = serde_json::from_str(&listed)?;
    let items = listed["items"].as_array().context("kubectl's items")?;
    let all_v1 = items
        .iter()
        .all(|i| i["apiVersion"] == "discovery.k8s.io/v1");
    ensure!(
        items.len() == 6 && all_v1,
        "kubectl through the v1 side: {listed}"
    );

    let (pool, rich_pool) = (&["10.0.0.1", "10.0.0.2"][..], &["10.0.7.1", "10.0.7.2"][..]);
    let mut want = vec![
        ("by-node-x", &["10.0.0.1"][..]),
        ("by-node-z", &["10.0.7.1"][..]),
        ("by-pool-x", pool),
        ("by-pool-z", rich_pool),
        ("plain-x", &["10.0.0.1", "10.0.0.2", "10.0.0.3"][..]),
        (
            "plain-z",
            &["10.0.7.1", "10.0.7.2", "10.0.7.3", "10.0.7.4", "10.0.7.5"][..],
        ),
    ];
    let v1 = sides.agreed(&ns, &view(&want))?;
    println!("kube-proxy's {} slices, the same on both sides", v1.len());
    v1_as_kube_apiserver_converts(&v1, &ns)?;
    for ((_, gateway, _), v) in sides.sides.iter().zip(["v1", "v1beta1"]) {
        let series = format!(
            "edgegate_multiplexer_answers_total{{resource=\"discovery.k8s.io/{v}/endpointslices\",verb=\"list\"}}"
        );
        ensure!(
            metric_sample(gateway.hub, &series)? > 0.0,
            "the {v} side's multiplexer answered"
        );
    }

    // Changes in the cloud reach both watches alike.
    let mut watches = sides.watches()?;
    let added = rich_slices(&ns, &["by-pool"], "y", "10.0.7.1");
    apply(&cluster, &scratch, "added.json", &added)?;
    let changed = rich_slices(&ns, &["by-node"], "z", "10.0.9.1");
    apply(&cluster, &scratch, "changed.json", &changed)?;
    cluster.kubectl(&["delete", "endpointslice", "-n", &ns, "by-pool-x"])?;
    let seen = sides.same_events(&mut watches, &ns, "by-pool-x")?;
    let expected = ["ADDED by-pool-y", "MODIFIED by-node-z", "DELETED by-pool-x"];
    ensure!(seen == expected, "{seen:?}");
    want.retain(|(name, _)| *name != "by-pool-x");
    want.push(("by-pool-y", rich_pool));
    want.iter_mut()
        .filter(|w| w.0 == "by-node-z")
        .for_each(|w| w.1 = &["10.0.9.1"]);
    let online = sides.agreed(&ns, &view(&want))?;

    // The v1 side's feed watched in protobuf through the stand-in, and never fell back.
    let counts = standin.counts();
    println!("the stand-in answered: {counts:?}");
    let protobuf = counts.protobuf_watches >= 1 && counts.protobuf_events >= 3;
    ensure!(
        protobuf && counts.json_watches == 0 && !fell_back(&sides),
        "{counts:?}"
    );

    // Offline, then restarted offline (from the cache): the same on both.
    sides.cut(true)?;
    ensure!(
        sides.agreed(&ns, &view(&want))? == online,
        "offline, the v1 list changed"
    );
    for (_, gateway, _) in &mut sides.sides {
        gateway.stop(Duration::from_secs(5));
        gateway.restart()?;
    }
    let restarted = sides.agreed(&ns, &view(&want))?;
    ensure!(
        restarted == online,
        "restarted offline, the v1 list changed"
    );

    // Watches opened offline get the cloud's change once it is back.
    let mut watches = sides.watches()?;
    cluster.kubectl(&["delete", "endpointslice", "-n", &ns, "by-pool-y"])?;
    sides.cut(false)?;
    let seen = sides.same_events(&mut watches, &ns, "by-pool-y")?;
    println!(
        "back online, both watches got {seen:?}; the stand-in: {:?}",
        standin.counts()
    );
    ensure!(!fell_back(&sides), "the v1 side fell back to JSON");
    Ok(())
}
