//! Filters written in Python and JavaScript (`filters-py/`, `filters-js/`, built into
//! components by their `build`) in a gateway before a real kube-apiserver: node clients
//! receive from them what the Rust filters they port give them, in lists and in watches.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{Cluster, Gateway, http, process::wait_until};
use serde_json::Value;

use crate::support::{Env, Watch, apply, client, list_as, namespace, runtime, wait_readyz};
use crate::topology::{
    KUBE_PROXY, KUBELET, endpoints, filter_dir, nodes_and_pools, services_and_slices,
};

/// The filters each gateway runs.
const PORTED: [&str; 2] = ["servicetopology", "masterservice"];

/// A language's ports: its name, its tree, the filters of [`PORTED`] it has (the Rust
/// component stands in for the others, in the same chain), and the `NAME.toml` its filters
/// need.
struct Port {
    language: &'static str,
    tree: &'static str,
    filters: &'static [&'static str],
    toml: &'static str,
}

const PORTS: [Port; 2] = [
    Port {
        language: "Python",
        tree: "filters-py",
        filters: &["servicetopology", "masterservice"],
        toml: "",
    },
    Port {
        language: "JavaScript",
        tree: "filters-js",
        filters: &["servicetopology", "masterservice"],
        // docs/filters/javascript.md, "Memory".
        toml: "[limits]\nmemory-mib = 128\n",
    },
];

/// The same cluster through a gateway running the Rust filters and one per language running
/// its ports, all on edge-1 of pool hangzhou: kube-proxy's EndpointSlices (v1beta1) and core
/// Endpoints, and kubelet's Services, are the same JSON from each, and are filtered (edge-1's
/// and hangzhou's endpoints only; `default/kubernetes` at the hub's address). A watch of
/// kube-proxy's sees a new slice filtered alike from each.
pub fn ported_filters_give_node_clients_what_the_rust_ones_give(env: &Env) -> Result<()> {
    let cluster = env.private_cluster()?;
    let scratch = cluster.dir.join("foreign");
    std::fs::create_dir_all(&scratch)?;
    let nodes = ["edge-1", "edge-2", "edge-3"];
    nodes_and_pools(&cluster, &scratch, nodes)?;
    let ns = namespace(&cluster, "foreign")?;
    services_and_slices(&cluster, &scratch, &ns, nodes)?;
    core_endpoints(&cluster, &scratch, &ns, nodes)?;
    let rust = start(env, &cluster, &filter_dir(&scratch.join("rust"), &PORTED)?)?;
    let mut ports = Vec::new();
    for port in &PORTS {
        let dir = port_filter_dir(&scratch.join(port.tree), port)?;
        ports.push((port.language, start(env, &cluster, &dir)?));
    }

    // The Rust gateway's views, once its informers know the pool.
    let want: BTreeMap<String, Vec<String>> = [
        ("by-node-x", vec!["10.0.0.1"]),
        ("by-pool-x", vec!["10.0.0.1", "10.0.0.2"]),
        ("plain-x", vec!["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
    ]
    .into_iter()
    .map(|(name, ips)| {
        (
            name.to_owned(),
            ips.into_iter().map(str::to_owned).collect(),
        )
    })
    .collect();
    let mut seen = Views::default();
    wait_until(Duration::from_secs(30), "the Rust filters' views", || {
        seen = Views::of(&rust, &ns).unwrap_or_default();
        endpoints(&seen.slices) == want
    })
    .with_context(|| format!("kube-proxy's slices: {:?}", endpoints(&seen.slices)))?;
    let expected = Views::of(&rust, &ns)?;
    ensure!(
        addresses(&expected.endpoints)
            == BTreeMap::from([
                ("by-node".to_owned(), vec!["10.0.0.1".to_owned()]),
                (
                    "by-pool".to_owned(),
                    vec!["10.0.0.1".to_owned(), "10.0.0.2".to_owned()]
                ),
            ]),
        "kube-proxy's Endpoints through the Rust filters: {:?}",
        addresses(&expected.endpoints)
    );
    let master = expected
        .services
        .iter()
        .find(|s| s["metadata"]["name"] == "kubernetes" && s["metadata"]["namespace"] == "default")
        .context("default/kubernetes")?;
    ensure!(
        master["spec"]["clusterIP"] == "169.254.2.1",
        "kubelet's default/kubernetes through the Rust filters: {master}"
    );

    for (language, gateway) in &ports {
        let mut got = Views::default();
        wait_until(Duration::from_secs(30), "the ported filters' views", || {
            got = Views::of(gateway, &ns).unwrap_or_default();
            got == expected
        })
        .with_context(|| {
            format!(
                "Rust: {}\n{language}: {}",
                expected.summary(),
                got.summary()
            )
        })?;
    }

    // A watch: the same new slice, filtered alike.
    let rt = runtime();
    let client = client();
    let slices = |gateway: &Gateway| slices_url(gateway, &ns);
    let (rv, _) = rt.block_on(list_as(&client, &slices(&rust), KUBE_PROXY))?;
    let mut watches = Vec::new();
    for gateway in std::iter::once(&rust).chain(ports.iter().map(|(_, gateway)| gateway)) {
        let url = format!("{}?watch=true&resourceVersion={rv}", slices(gateway));
        watches.push(rt.block_on(Watch::open(&client, &url, KUBE_PROXY))?);
    }
    let second = serde_json::json!({"apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
        "metadata": {"name": "by-pool-y", "namespace": ns, "labels": {"kubernetes.io/service-name": "by-pool"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["10.0.1.3"], "topology": {"kubernetes.io/hostname": "edge-3"}},
                      {"addresses": ["10.0.1.2"], "topology": {"kubernetes.io/hostname": "edge-2"}}]});
    apply(&cluster, &scratch, "second.json", &second.to_string())?;
    let mut added = Vec::new();
    for watch in &mut watches {
        let event = rt.block_on(watch.wait_for("ADDED", "by-pool-y", Duration::from_secs(10)))?;
        added.push(event["object"].clone());
    }
    ensure!(
        endpoints(&added[..1])["by-pool-y"] == ["10.0.1.2"],
        "the Rust filter's event: {}",
        added[0]
    );
    for ((language, _), event) in ports.iter().zip(&added[1..]) {
        ensure!(
            *event == added[0],
            "{language}'s event differs from Rust's: {event} / {}",
            added[0]
        );
    }
    Ok(())
}

/// A gateway on edge-1 serving its HTTPS proxy (masterservice points kubelet at it) with the
/// filters of `dir`, once it is ready and has loaded every ported filter.
fn start(env: &Env, cluster: &Cluster, dir: &Path) -> Result<Gateway> {
    let port = edgegate_testkit::process::free_port()?;
    let pki = &cluster.pki;
    let gateway = Gateway::start(
        &env.bin,
        cluster,
        &[
            &format!("--filter-dir={}", dir.display()),
            "--node-name=edge-1",
            &format!("--proxy-secure-port={port}"),
            &format!("--tls-cert-file={}", pki.gateway_serving_cert.display()),
            &format!(
                "--tls-private-key-file={}",
                pki.gateway_serving_key.display()
            ),
        ],
    )?;
    wait_readyz(&gateway, 200, "the gateway to be ready")?;
    // A Python or JavaScript component compiles for 7-30 s on two cores.
    wait_until(Duration::from_secs(300), "the filters to load", || {
        let chain: Value = http::get(gateway.hub, "/v1/filters")
            .ok()
            .and_then(|r| serde_json::from_str(&r.body).ok())
            .unwrap_or_default();
        let names: Vec<&str> = chain["filters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["name"].as_str())
            .collect();
        PORTED.iter().all(|name| names.contains(name))
    })
    .with_context(|| gateway.log_tail(20))?;
    Ok(gateway)
}

/// A filter directory under `under` with `port`'s components of [`PORTED`], each with the
/// `NAME.toml` it needs, and the Rust ones of those it does not port.
fn port_filter_dir(under: &Path, port: &Port) -> Result<PathBuf> {
    let dir = filter_dir(under, &PORTED)?;
    let built = edgegate_testkit::filters::built_in(port.tree, port.filters)?;
    for name in port.filters {
        std::fs::copy(
            built.join(format!("{name}.wasm")),
            dir.join(format!("{name}.wasm")),
        )?;
        std::fs::write(dir.join(format!("{name}.toml")), port.toml)?;
    }
    Ok(dir)
}

/// Core v1 Endpoints of the Services by-node and by-pool: a ready address on edge-1 and
/// edge-2 each, and a not-ready one on edge-3.
fn core_endpoints(cluster: &Cluster, dir: &Path, ns: &str, nodes: [&str; 3]) -> Result<()> {
    let endpoints = |name: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": name, "namespace": ns},
            "subsets": [{"addresses": [{"ip": "10.0.0.1", "nodeName": nodes[0]},
                                       {"ip": "10.0.0.2", "nodeName": nodes[1]}],
                         "notReadyAddresses": [{"ip": "10.0.0.3", "nodeName": nodes[2]}],
                         "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}]})
    };
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List",
        "items": [endpoints("by-node"), endpoints("by-pool")]});
    apply(cluster, dir, "endpoints.json", &list.to_string())
}

/// What kube-proxy and kubelet list through one gateway.
#[derive(Debug, Default, PartialEq)]
struct Views {
    /// kube-proxy's EndpointSlices (v1beta1) of the test's namespace.
    slices: Vec<Value>,
    /// kube-proxy's Endpoints of the test's namespace.
    endpoints: Vec<Value>,
    /// kubelet's Services, of every namespace.
    services: Vec<Value>,
}

impl Views {
    fn of(gateway: &Gateway, ns: &str) -> Result<Views> {
        let rt = runtime();
        let client = client();
        let list = |url: String, agent| rt.block_on(list_as(&client, &url, agent)).map(|l| l.1);
        Ok(Views {
            slices: list(slices_url(gateway, ns), KUBE_PROXY)?,
            endpoints: list(
                format!("{}/api/v1/namespaces/{ns}/endpoints", gateway.url()),
                KUBE_PROXY,
            )?,
            services: list(format!("{}/api/v1/services", gateway.url()), KUBELET)?,
        })
    }
}

impl Views {
    /// Where the views differ, readably: the slices' and Endpoints' addresses, and each
    /// Service's cluster IP and ports.
    fn summary(&self) -> String {
        let services: BTreeMap<String, String> = self
            .services
            .iter()
            .map(|s| {
                let name = format!("{}/{}", s["metadata"]["namespace"], s["metadata"]["name"]);
                (
                    name,
                    format!("{} {}", s["spec"]["clusterIP"], s["spec"]["ports"]),
                )
            })
            .collect();
        format!(
            "slices {:?}; endpoints {:?}; services {services:?}",
            endpoints(&self.slices),
            addresses(&self.endpoints)
        )
    }
}

fn slices_url(gateway: &Gateway, ns: &str) -> String {
    format!(
        "{}/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices",
        gateway.url()
    )
}

/// `Endpoints name → addresses` (ready and not ready), sorted.
fn addresses(items: &[Value]) -> BTreeMap<String, Vec<String>> {
    items
        .iter()
        .map(|item| {
            let mut ips: Vec<String> = item["subsets"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|subset| {
                    ["addresses", "notReadyAddresses"]
                        .into_iter()
                        .flat_map(move |key| subset[key].as_array().into_iter().flatten())
                })
                .filter_map(|address| address["ip"].as_str().map(str::to_owned))
                .collect();
            ips.sort();
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            (name.to_owned(), ips)
        })
        .collect()
}
