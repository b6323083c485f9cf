//! YurtHub's filters as Wasm components in front of a real kube-apiserver: what kube-proxy,
//! kubelet and kubectl each see, online and from the cache, and how a watch follows changes
//! of the filters and of the objects they judge.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{ADMIN_TOKEN, Cluster, Gateway, process::wait_until};

use crate::support::{
    Env, Watch, apply, client, list_as, list_json_as, names, runtime, unique, wait_readyz,
};

pub(crate) const KUBE_PROXY: &str = "kube-proxy/v1.20.2 (linux/amd64) kubernetes/faecb19";
pub(crate) const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";
const KUBECTL: &str = "kubectl/v1.20.2 (linux/amd64) kubernetes/faecb19";

/// The seven YurtHub filters.
const FILTERS: [&str; 7] = [
    "servicetopology",
    "masterservice",
    "discard-cloud-service",
    "nodeportisolation",
    "inclusterconfig",
    "forwardkubesvctraffic",
    "serviceenvupdater",
];

/// Copies the built filters `names` into a fresh filter directory under `under`.
pub(crate) fn filter_dir(under: &Path, names: &[&str]) -> Result<std::path::PathBuf> {
    let built = edgegate_testkit::filters::built(names)?;
    let dir = under.join("filters");
    std::fs::create_dir_all(&dir)?;
    for name in names {
        std::fs::copy(
            built.join(format!("{name}.wasm")),
            dir.join(format!("{name}.wasm")),
        )?;
    }
    Ok(dir)
}

/// The NodePool CRD (apps.openyurt.io/v1beta1, cluster-scoped), three nodes in two pools,
/// and the pools with their members.
pub(crate) fn nodes_and_pools(cluster: &Cluster, dir: &Path, nodes: [&str; 3]) -> Result<()> {
    apply(
        cluster,
        dir,
        "crd.json",
        r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
            "metadata":{"name":"nodepools.apps.openyurt.io"},
            "spec":{"group":"apps.openyurt.io","scope":"Cluster",
              "names":{"plural":"nodepools","singular":"nodepool","kind":"NodePool","listKind":"NodePoolList"},
              "versions":[{"name":"v1beta1","served":true,"storage":true,
                "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#,
    )?;
    wait_until(
        Duration::from_secs(30),
        "the NodePool CRD to be served",
        || cluster.kubectl(&["get", "nodepools"]).is_ok(),
    )?;
    let node = |name: &str, pool: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{name}","labels":{{"apps.openyurt.io/nodepool":"{pool}"}}}}}}"#
        )
    };
    let pool = |name: &str, members: &[&str]| {
        format!(
            r#"{{"apiVersion":"apps.openyurt.io/v1beta1","kind":"NodePool","metadata":{{"name":"{name}"}},"spec":{{"type":"Edge"}},"status":{{"nodes":{members:?}}}}}"#
        )
    };
    apply(
        cluster,
        dir,
        "nodes.json",
        &format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[{},{},{},{},{}]}}"#,
            node(nodes[0], "hangzhou"),
            node(nodes[1], "hangzhou"),
            node(nodes[2], "shanghai"),
            pool("hangzhou", &[nodes[0], nodes[1]]),
            pool("shanghai", &[nodes[2]]),
        ),
    )
}

/// Services (by topology, plus LoadBalancers with and without the discard annotation) and
/// v1beta1 EndpointSlices with one endpoint on each node.
pub(crate) fn services_and_slices(
    cluster: &Cluster,
    dir: &Path,
    ns: &str,
    nodes: [&str; 3],
) -> Result<()> {
    let service = |name: &str, kind: &str, annotations: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"{name}","namespace":"{ns}","annotations":{{{annotations}}}}},"spec":{{"type":"{kind}","ports":[{{"name":"http","port":80}}]}}}}"#
        )
    };
    let slice = |service: &str| {
        let endpoints: Vec<String> = nodes
            .iter()
            .enumerate()
            .map(|(i, node)| format!(r#"{{"addresses":["10.0.0.{}"],"topology":{{"kubernetes.io/hostname":"{node}"}}}}"#, i + 1))
            .collect();
        format!(
            r#"{{"apiVersion":"discovery.k8s.io/v1beta1","kind":"EndpointSlice","metadata":{{"name":"{service}-x","namespace":"{ns}","labels":{{"kubernetes.io/service-name":"{service}"}}}},"addressType":"IPv4","endpoints":[{}],"ports":[{{"name":"http","port":80,"protocol":"TCP"}}]}}"#,
            endpoints.join(",")
        )
    };
    let items = [
        service(
            "by-node",
            "ClusterIP",
            r#""openyurt.io/topologyKeys":"kubernetes.io/hostname""#,
        ),
        service(
            "by-pool",
            "ClusterIP",
            r#""openyurt.io/topologyKeys":"openyurt.io/nodepool""#,
        ),
        service("plain", "ClusterIP", ""),
        service(
            "lb-discarded",
            "LoadBalancer",
            r#""svc.openyurt.io/discard":"true""#,
        ),
        service("lb-kept", "LoadBalancer", ""),
        slice("by-node"),
        slice("by-pool"),
        slice("plain"),
    ];
    apply(
        cluster,
        dir,
        "services.json",
        &format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
            items.join(",")
        ),
    )
}

/// `slice name → endpoint addresses` of a list of EndpointSlices.
pub(crate) fn endpoints(items: &[serde_json::Value]) -> BTreeMap<String, Vec<String>> {
    items
        .iter()
        .map(|slice| {
            let addresses = slice["endpoints"]
                .as_array()
                .map(|endpoints| {
                    endpoints
                        .iter()
                        .filter_map(|e| e["addresses"][0].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            (
                slice["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                addresses,
            )
        })
        .collect()
}

/// kube-proxy sees only this node's (or pool's) endpoints and no discarded LoadBalancer,
/// kubectl sees everything, kubelet sees `default/kubernetes` at the gateway's address —
/// online through the filters loaded from --filter-dir, and the same from the cache once
/// kube-apiserver is stopped.
pub fn each_component_sees_its_filtered_view_online_and_offline(env: &Env) -> Result<()> {
    let cluster = env.private_cluster()?;
    let scratch = cluster.dir.join("topology");
    std::fs::create_dir_all(&scratch)?;
    let nodes = ["edge-1", "edge-2", "edge-3"];
    nodes_and_pools(&cluster, &scratch, nodes)?;
    let ns = crate::support::namespace(&cluster, "topology")?;
    services_and_slices(&cluster, &scratch, &ns, nodes)?;
    let filters = filter_dir(&scratch, &FILTERS)?;
    let gateway = Gateway::start(
        &env.bin,
        &cluster,
        &[
            &format!("--filter-dir={}", filters.display()),
            "--node-name=edge-1",
            "--heartbeat-interval-seconds=2",
            // masterservice points pods at the HTTPS proxy: it is served.
            &format!(
                "--proxy-secure-port={}",
                edgegate_testkit::process::free_port()?
            ),
            &format!(
                "--tls-cert-file={}",
                cluster.pki.gateway_serving_cert.display()
            ),
            &format!(
                "--tls-private-key-file={}",
                cluster.pki.gateway_serving_key.display()
            ),
        ],
    )?;
    wait_readyz(&gateway, 200, "the gateway to be ready (informers synced)")?;
    // Start-up is over once the informers synced: the code only it ran is given back, and
    // every view below is served after that.
    wait_until(Duration::from_secs(10), "start-up code paged out", || {
        gateway
            .log_tail(usize::MAX)
            .contains("code mapped at start-up advised out")
    })?;
    let rt = runtime();
    let client = client();
    let slices = format!(
        "{}/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices",
        gateway.url()
    );
    let services = format!("{}/api/v1/services", gateway.url());
    let by_node = vec!["10.0.0.1".to_owned()];
    let by_pool = vec!["10.0.0.1".to_owned(), "10.0.0.2".to_owned()];
    let all = vec![
        "10.0.0.1".to_owned(),
        "10.0.0.2".to_owned(),
        "10.0.0.3".to_owned(),
    ];
    let want: BTreeMap<String, Vec<String>> = [
        ("by-node-x".to_owned(), by_node.clone()),
        ("by-pool-x".to_owned(), by_pool.clone()),
        ("plain-x".to_owned(), all.clone()),
    ]
    .into();

    // The pool comes from edge-1's label; wait until the filters see it.
    let mut proxy_slices = Vec::new();
    wait_until(
        Duration::from_secs(15),
        "kube-proxy's view by node and pool",
        || {
            proxy_slices = rt
                .block_on(list_as(&client, &slices, KUBE_PROXY))
                .map(|l| l.1)
                .unwrap_or_default();
            endpoints(&proxy_slices) == want
        },
    )
    .with_context(|| format!("kube-proxy sees {:?}", endpoints(&proxy_slices)))?;
    let (_, kubectl_slices) = rt.block_on(list_json_as(&client, &slices, KUBECTL))?;
    ensure!(
        endpoints(&kubectl_slices).values().all(|e| *e == all),
        "kubectl sees every endpoint"
    );

    // A watch as kube-proxy sees a new slice filtered the same way.
    let (rv, _) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    let mut watch = rt.block_on(Watch::open(
        &client,
        &format!("{slices}?watch=true&resourceVersion={rv}"),
        KUBE_PROXY,
    ))?;
    let mut second = serde_json::from_str::<serde_json::Value>(&cluster.kubectl(&[
        "get",
        "endpointslice",
        "by-node-x",
        "-n",
        &ns,
        "-o",
        "json",
    ])?)?;
    second["metadata"] = serde_json::json!({"name": "by-node-y", "namespace": ns, "labels": {"kubernetes.io/service-name": "by-node"}});
    apply(&cluster, &scratch, "second.json", &second.to_string())?;
    let added = rt.block_on(watch.wait_for("ADDED", "by-node-y", Duration::from_secs(10)))?;
    ensure!(
        endpoints(&[added["object"].clone()])["by-node-y"] == by_node,
        "the watch is filtered: {added}"
    );

    let (_, proxy_services) = rt.block_on(list_as(&client, &services, KUBE_PROXY))?;
    let (_, kubectl_services) = rt.block_on(list_json_as(&client, &services, KUBECTL))?;
    ensure!(
        !names(&proxy_services).contains(&"lb-discarded".into())
            && names(&proxy_services).contains(&"lb-kept".into()),
        "kube-proxy: {:?}",
        names(&proxy_services)
    );
    ensure!(
        names(&kubectl_services).contains(&"lb-discarded".into()),
        "kubectl sees the discarded service"
    );
    let (_, kubelet_services) = rt.block_on(list_as(&client, &services, KUBELET))?;
    let master = kubelet_services
        .iter()
        .find(|s| s["metadata"]["name"] == "kubernetes" && s["metadata"]["namespace"] == "default")
        .context("default/kubernetes")?;
    ensure!(
        master["spec"]["clusterIP"] == "169.254.2.1"
            && master["spec"]["clusterIPs"] == serde_json::json!(["169.254.2.1"]),
        "kubelet's default/kubernetes: {master}"
    );
    let https = master["spec"]["ports"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "https"))
        .context("an https port")?;
    ensure!(https["port"] == 10268, "kubelet's https port: {https}");

    // Offline: the same lists, from the cache, equally filtered.
    let commits = crate::support::metric(gateway.hub, "edgegate_cache_commits_total")?;
    let (_, proxy_slices_now) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    crate::support::wait_metric(gateway.hub, "edgegate_cache_commits_total", commits + 1.0)?;
    cluster.stop_apiserver()?;
    wait_readyz(&gateway, 503, "the gateway to notice the outage")?;
    let (_, offline_slices) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    ensure!(
        offline_slices == proxy_slices_now,
        "kube-proxy's offline slices differ: {:?}",
        endpoints(&offline_slices)
    );
    let (_, offline_services) = rt.block_on(list_as(&client, &services, KUBE_PROXY))?;
    ensure!(
        offline_services == proxy_services,
        "kube-proxy's offline services differ"
    );
    let (_, offline_kubelet) = rt.block_on(list_as(&client, &services, KUBELET))?;
    ensure!(
        offline_kubelet == kubelet_services,
        "kubelet's offline services differ"
    );
    Ok(())
}

/// The reflector's backoff: re-list 50 ms after a watch ends. kube-rs's default waits
/// 0.8 s or more (jittered, as client-go's) first, which would time the client, not the gateway.
struct Prompt;

impl Iterator for Prompt {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(50))
    }
}

impl kube::runtime::utils::Backoff for Prompt {
    fn reset(&mut self) {}
}

/// Removing `discard-cloud-service.wasm` while a kube-proxy reflector (kube-rs, as an
/// informer) runs: within 2 s its watch is ended, it re-lists, and its store holds the
/// discarded Service — with no restart of client or gateway. Annotating a LoadBalancer
/// Service with the discard annotation while the watch is open brings DELETED exactly once;
/// removing the annotation brings ADDED.
pub fn discard_follows_the_filter_and_the_annotation(env: &Env) -> Result<()> {
    use futures_util::StreamExt;
    use kube::runtime::{WatchStreamExt, reflector, watcher};

    let scratch = env.cluster.dir.join(unique("discard"));
    std::fs::create_dir_all(&scratch)?;
    let filters = filter_dir(&scratch, &FILTERS)?;
    let gateway = Gateway::start(
        &env.bin,
        &env.cluster,
        &[&format!("--filter-dir={}", filters.display())],
    )?;
    wait_readyz(&gateway, 200, "the gateway to be ready")?;
    // No HTTPS proxy here: masterservice is off, so kubelet is not told an address that
    // nothing serves, and the log says why.
    let rt = runtime();
    let services = format!("{}/api/v1/services", gateway.url());
    let (_, kubelet_services) = rt.block_on(list_as(&client(), &services, KUBELET))?;
    let master = kubelet_services
        .iter()
        .find(|s| s["metadata"]["name"] == "kubernetes" && s["metadata"]["namespace"] == "default")
        .context("default/kubernetes")?;
    let direct = env.cluster.kubectl(&[
        "get",
        "service",
        "kubernetes",
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ])?;
    ensure!(
        master["spec"]["clusterIP"] == direct.trim(),
        "without an HTTPS proxy, kubelet's default/kubernetes is the cloud's ({direct}): {master}"
    );
    ensure!(
        gateway
            .log_tail(usize::MAX)
            .contains("masterservice is off: no HTTPS proxy is served"),
        "the start says why masterservice is off"
    );
    let ns = crate::support::namespace(&env.cluster, "discard")?;
    let lb = |name: &str, annotations: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"{name}","namespace":"{ns}","annotations":{{{annotations}}}}},"spec":{{"type":"LoadBalancer","ports":[{{"port":80}}]}}}}"#
        )
    };
    apply(
        &env.cluster,
        &scratch,
        "lbs.json",
        &format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[{},{}]}}"#,
            lb("lb-discarded", r#""svc.openyurt.io/discard":"true""#),
            lb("lb-toggled", "")
        ),
    )?;

    rt.block_on(async {
        let mut config = kube::Config::new(gateway.url().parse()?);
        config.auth_info.token = Some(ADMIN_TOKEN.to_owned().into());
        config.headers.push((::http::header::USER_AGENT, ::http::HeaderValue::from_static(KUBE_PROXY)));
        let kube_client = kube::Client::try_from(config)?;
        let resource = kube::api::ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk("", "v1", "Service"), "services");
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(kube_client, &ns, &resource);
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let informer = tokio::spawn(watcher(api, watcher::Config::default()).backoff(Prompt).reflect(writer).for_each(|_| async {}));
        store.wait_until_ready().await?;
        let held = |name: &str| store.state().iter().any(|s| s.metadata.name.as_deref() == Some(name));
        ensure!(held("lb-toggled") && !held("lb-discarded"), "the reflector starts without the discarded service");

        // Annotate and un-annotate while a raw kube-proxy watch is open.
        let client = client();
        let url = format!("{}/api/v1/namespaces/{ns}/services", gateway.url());
        let (rv, _) = list_as(&client, &url, KUBE_PROXY).await?;
        let mut watch = Watch::open(&client, &format!("{url}?watch=true&resourceVersion={rv}"), KUBE_PROXY).await?;
        let kubectl = |args: Vec<String>| {
            let (tools, kubeconfig) = (env.tools.clone(), env.cluster.admin_kubeconfig.clone());
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                edgegate_testkit::cluster::kubectl(&tools, &kubeconfig, &args)
            }
        };
        let svc = |verb: &str, extra: &str| vec![verb.to_owned(), "service".into(), "lb-toggled".into(), "-n".into(), ns.clone(), extra.to_owned()];
        kubectl(svc("annotate", "svc.openyurt.io/discard=true")).await?;
        let deleted = watch.wait_for("DELETED", "lb-toggled", Duration::from_secs(10)).await?;
        ensure!(deleted["object"]["metadata"]["name"] == "lb-toggled");
        kubectl(svc("label", "still=discarded")).await?;
        kubectl(svc("annotate", "svc.openyurt.io/discard-")).await?;
        let next = watch.next(Duration::from_secs(10)).await?.context("the watch goes on")?;
        ensure!(next["type"] == "ADDED" && next["object"]["metadata"]["name"] == "lb-toggled", "after un-annotating, ADDED (and nothing in between): {next}");

        // Remove the filter: the reflector's watch ends, it re-lists, the service appears.
        let removed = Instant::now();
        std::fs::remove_file(filters.join("discard-cloud-service.wasm"))?;
        let mut seen = None;
        while removed.elapsed() < Duration::from_secs(10) {
            if held("lb-discarded") {
                seen = Some(removed.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let seen = seen.context("the reflector never got the discarded service")?;
        println!("the reflector held the discarded service {seen:?} after discard-cloud-service.wasm was removed");
        let relist = watch.next(Duration::from_secs(5)).await?.context("an event before the end")?;
        ensure!(relist["type"] == "ERROR" && relist["object"]["code"] == 410, "the raw watch is told to re-list: {relist}");
        informer.abort();
        anyhow::Ok(())
    })
}
