//! Edge autonomy: what a node's components get from the gateway while the cloud is away.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::process::wait_until;
use edgegate_testkit::{Gateway, http};

use crate::support::{
    Env, Watch, apply, client, create_configmaps, get_as, list_as, namespace, relayed_gateway,
    runtime, wait_metric, wait_readyz,
};

const KUBE_PROXY: &str = "kube-proxy/v1.20.2 (linux/amd64) kubernetes/faecb19";
const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";

/// Services and EndpointSlices for kube-proxy: `web` with two slices, `db` with one.
fn services_and_slices(ns: &str) -> String {
    let service = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"{name}","namespace":"{ns}"}},"spec":{{"ports":[{{"name":"http","port":80}}]}}}}"#
        )
    };
    let slice = |name: &str, service: &str, ip: &str, node: &str| {
        format!(
            r#"{{"apiVersion":"discovery.k8s.io/v1beta1","kind":"EndpointSlice","metadata":{{"name":"{name}","namespace":"{ns}","labels":{{"kubernetes.io/service-name":"{service}"}}}},"addressType":"IPv4","endpoints":[{{"addresses":["{ip}"],"topology":{{"kubernetes.io/hostname":"{node}"}}}}],"ports":[{{"name":"http","port":80,"protocol":"TCP"}}]}}"#
        )
    };
    format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[{},{},{},{},{}]}}"#,
        service("web"),
        service("db"),
        slice("web-a", "web", "10.1.0.1", "edge-1"),
        slice("web-b", "web", "10.1.0.2", "edge-2"),
        slice("db-a", "db", "10.1.0.3", "edge-1"),
    )
}

/// As kube-proxy: list and watch services and endpointslices; stop kube-apiserver; the same
/// lists return the same items, a watch from the last resourceVersion waits without error,
/// and when kube-apiserver is back that watch is closed within the heartbeat interval + 1 s.
pub fn kube_proxy_keeps_its_view_offline(env: &Env) -> Result<()> {
    let cluster = env.private_cluster()?;
    let interval = 2;
    // The local cache's own path: no resource is shared by the multiplexer here.
    let gateway = Gateway::start(
        &env.bin,
        &cluster,
        &[
            &format!("--heartbeat-interval-seconds={interval}"),
            "--pool-scope-resources=",
        ],
    )?;
    let ns = namespace(&cluster, "offline")?;
    apply(
        &cluster,
        &gateway.dir,
        "kube-proxy.json",
        &services_and_slices(&ns),
    )?;
    let rt = runtime();
    let client = client();
    let services = format!("{}/api/v1/services", gateway.url());
    let slices = format!(
        "{}/apis/discovery.k8s.io/v1beta1/endpointslices",
        gateway.url()
    );

    let (services_rv, online_services) = rt.block_on(list_as(&client, &services, KUBE_PROXY))?;
    let (_, online_slices) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    ensure!(
        online_slices.len() >= 3 && online_services.len() >= 3,
        "the fixtures are listed"
    );
    let mut watch = rt.block_on(Watch::open(
        &client,
        &format!("{services}?watch=true&resourceVersion={services_rv}"),
        KUBE_PROXY,
    ))?;
    crate::support::wait_sets(gateway.hub, "kube-proxy", 2)?;

    cluster.stop_apiserver()?;
    // The open watch is cut with its upstream: the client will re-list.
    let ended = rt.block_on(watch.next(Duration::from_secs(10)));
    ensure!(
        !matches!(ended, Ok(Some(_))),
        "the watch must end when the cloud goes: {ended:?}"
    );

    let (_, offline_services) = rt.block_on(list_as(&client, &services, KUBE_PROXY))?;
    let (_, offline_slices) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    ensure!(
        offline_services == online_services,
        "offline services differ:\n{offline_services:?}\nvs\n{online_services:?}"
    );
    ensure!(
        offline_slices == online_slices,
        "offline endpointslices differ"
    );

    let mut offline_watch = rt.block_on(Watch::open(
        &client,
        &format!("{services}?watch=true&resourceVersion={services_rv}"),
        KUBE_PROXY,
    ))?;
    let quiet = rt.block_on(offline_watch.next(Duration::from_secs(3)));
    ensure!(
        quiet.is_err(),
        "an offline watch from the last version waits quietly, got {quiet:?}"
    );

    cluster.start_apiserver()?;
    let back = Instant::now();
    let end = rt.block_on(offline_watch.next(Duration::from_secs(30)));
    let took = back.elapsed();
    ensure!(
        matches!(end, Ok(None)),
        "the offline watch must end cleanly when the cloud is back: {end:?}"
    );
    println!(
        "offline watch closed {took:?} after kube-apiserver was ready again (heartbeat interval {interval} s)"
    );
    ensure!(
        took <= Duration::from_secs(interval + 1),
        "closed after {took:?}, more than the interval + 1 s"
    );
    let (_, relisted) = rt.block_on(list_as(&client, &services, KUBE_PROXY))?;
    ensure!(
        relisted == online_services,
        "the re-list online sees the same services"
    );
    Ok(())
}

/// The gateway restarted while kube-apiserver is down serves lists from its cache, and its
/// readyz says it is degraded.
pub fn restart_while_offline_serves_from_cache(env: &Env) -> Result<()> {
    let cluster = env.private_cluster()?;
    let mut gateway = Gateway::start(&env.bin, &cluster, &["--heartbeat-interval-seconds=2"])?;
    let ns = namespace(&cluster, "restart")?;
    apply(
        &cluster,
        &gateway.dir,
        "kube-proxy.json",
        &services_and_slices(&ns),
    )?;
    let rt = runtime();
    let client = client();
    let slices = format!(
        "{}/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices",
        gateway.url()
    );
    let (_, online) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    crate::support::wait_sets(gateway.hub, "kube-proxy", 1)?;

    cluster.stop_apiserver()?;
    gateway.stop(Duration::from_secs(5));
    gateway.restart()?;
    let readyz = http::get(gateway.hub, "/v1/readyz")?;
    ensure!(
        readyz.status == 503 && readyz.body.contains("degraded"),
        "readyz: {readyz:?}"
    );
    let (_, offline) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    ensure!(
        offline == online,
        "after the restart the cached list differs"
    );
    Ok(())
}

/// An object deleted while the gateway is cut off from the cloud disappears after the
/// reconnect: the next list no longer returns it, and the cache no longer holds it.
pub fn objects_deleted_while_offline_disappear(env: &Env) -> Result<()> {
    let (relay, gateway) = relayed_gateway(env)?;
    let ns = namespace(&env.cluster, "deleted")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", 5))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let (_, before) = rt.block_on(list_as(&client, &url, KUBELET))?;
    ensure!(before.len() == 5, "five configmaps: {}", before.len());
    crate::support::wait_sets(gateway.hub, "kubelet", 1)?;

    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;
    env.cluster
        .kubectl(&["delete", "configmap", "cm-3", "-n", &ns])?;
    let (_, offline) = rt.block_on(list_as(&client, &url, KUBELET))?;
    ensure!(
        offline == before,
        "offline, the cache still answers with what it had"
    );

    relay.restore();
    wait_readyz(&gateway, 200, "the gateway to reconnect")?;
    let commits = crate::support::metric(gateway.hub, "edgegate_cache_commits_total")?;
    let (_, after) = rt.block_on(list_as(&client, &url, KUBELET))?;
    ensure!(
        after.len() == 4 && !after.iter().any(|i| i["metadata"]["name"] == "cm-3"),
        "the re-list lacks cm-3"
    );
    wait_metric(gateway.hub, "edgegate_cache_commits_total", commits + 1.0)?;

    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the second cut")?;
    let (_, cached) = rt.block_on(list_as(&client, &url, KUBELET))?;
    ensure!(cached == after, "the cache no longer holds cm-3");
    let (status, _) = rt.block_on(get_as(&client, &format!("{url}/cm-3"), KUBELET))?;
    ensure!(
        status == 404,
        "a get of the deleted object offline answers {status}"
    );
    Ok(())
}

/// Online, an error answer to a cached component is passed through uncounted. Offline, a
/// list with a label selector returns only the matching cached objects; writes are answered
/// as YurtHub answers them; unknown resources and kubelet's empty pod list are 404.
pub fn offline_answers_follow_the_request(env: &Env) -> Result<()> {
    let (relay, gateway) = relayed_gateway(env)?;
    let ns = namespace(&env.cluster, "selector")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "sel", 10))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let (_, all) = rt.block_on(list_as(&client, &url, KUBELET))?;
    let pods = format!("{}/api/v1/namespaces/{ns}/pods", gateway.url());
    rt.block_on(list_as(&client, &pods, KUBELET))?;
    let lease = format!(
        "{}/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
        gateway.url()
    );
    crate::support::wait_sets(gateway.hub, "kubelet", 2)?;

    // An error answer is passed through, and it is not a list the cache gave up on.
    let aborted = "edgegate_cache_aborted_lists_total";
    let before = crate::support::metric(gateway.hub, aborted)?;
    let unserved = format!("{}/apis/apps.openyurt.io/v1alpha1/nodepools", gateway.url());
    let (status, _) = rt.block_on(get_as(&client, &unserved, KUBELET))?;
    ensure!(
        status == 404,
        "a list of an unserved resource answers {status}"
    );
    let after = crate::support::metric(gateway.hub, aborted)?;
    ensure!(
        after == before,
        "aborted lists went from {before} to {after}"
    );

    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;
    let (_, selected) = rt.block_on(list_as(
        &client,
        &format!("{url}?labelSelector=group%3D1"),
        KUBELET,
    ))?;
    let want: Vec<_> = all
        .iter()
        .filter(|i| i["metadata"]["labels"]["group"] == "1")
        .cloned()
        .collect();
    ensure!(
        selected.len() == 5 && selected == want,
        "label selector offline: {} items",
        selected.len()
    );
    let (_, by_field) = rt.block_on(list_as(
        &client,
        &format!("{url}?fieldSelector=metadata.name%3Dsel-7"),
        KUBELET,
    ))?;
    ensure!(
        by_field.len() == 1 && by_field[0]["metadata"]["name"] == "sel-7",
        "field selector offline"
    );

    let answer = |method: ::http::Method,
                  url: &str,
                  body: Option<&str>|
     -> Result<(u16, serde_json::Value)> {
        rt.block_on(async {
            let response = client
                .request(crate::support::request(
                    method,
                    url,
                    Some(edgegate_testkit::ADMIN_TOKEN),
                    KUBELET,
                    body,
                )?)
                .await?;
            let status = response.status().as_u16();
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await?
                .to_bytes();
            Ok((status, serde_json::from_slice(&body).unwrap_or_default()))
        })
    };
    let created = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"made-offline"}}"#;
    let (code, body) = answer(::http::Method::POST, &url, Some(created))?;
    ensure!(
        code == 201 && body["metadata"]["name"] == "made-offline",
        "create echoes: {code} {body}"
    );
    let (code, body) = answer(::http::Method::PUT, &format!("{url}/sel-2"), Some(created))?;
    ensure!(
        code == 200 && body["metadata"]["name"] == "sel-2",
        "update answers the cached object: {code} {body}"
    );
    let (code, body) = answer(::http::Method::DELETE, &format!("{url}/sel-2"), None)?;
    ensure!(
        code == 403 && body["kind"] == "Status",
        "delete is refused: {code} {body}"
    );
    let renewal = r#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"edge-1"},"spec":{"holderIdentity":"edge-1"}}"#;
    let (code, body) = answer(
        ::http::Method::PUT,
        &format!("{lease}/edge-1"),
        Some(renewal),
    )?;
    ensure!(
        code == 200 && body["spec"]["holderIdentity"] == "edge-1",
        "kubelet's lease renewal is accepted: {code} {body}"
    );
    let (code, body) = answer(::http::Method::GET, &pods, None)?;
    ensure!(
        code == 404 && body["kind"] == "Status",
        "kubelet's empty pod list is refused: {code} {body}"
    );
    let (code, _) = answer(
        ::http::Method::GET,
        &format!("{}/api/v1/namespaces/{ns}/secrets", gateway.url()),
        None,
    )?;
    ensure!(code == 404, "an uncached resource is 404: {code}");
    Ok(())
}

/// A paginated list (`limit=100`) over 1 000 objects is cached complete: committed once, at
/// its last page, with every item.
pub fn paginated_list_is_cached_complete(env: &Env) -> Result<()> {
    let mut gateway = env.gateway(&[])?;
    let ns = namespace(&env.cluster, "pages")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(
        &client,
        &gateway.url(),
        &ns,
        "page",
        1000,
    ))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let mut token = String::new();
    let mut seen = 0;
    let mut pages = 0;
    loop {
        let page_url = if token.is_empty() {
            format!("{url}?limit=100")
        } else {
            format!("{url}?limit=100&continue={token}")
        };
        let (status, body) = rt.block_on(get_as(&client, &page_url, KUBELET))?;
        ensure!(status == 200, "page {pages}: {status}");
        let page: serde_json::Value = serde_json::from_slice(&body)?;
        seen += page["items"].as_array().map_or(0, Vec::len);
        pages += 1;
        if pages < 10 {
            // The gateway's own yurt-hub-cfg list commits too: look at kubelet's sets.
            let listing = http::get(gateway.hub, "/v1/cache")?.body;
            let sets: Vec<serde_json::Value> = serde_json::from_str(&listing)?;
            let kubelets = sets.iter().filter(|s| s["component"] == "kubelet").count();
            ensure!(
                kubelets == 0,
                "nothing is committed before the last page ({kubelets} set(s) after page {pages})"
            );
        }
        token = page["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if token.is_empty() {
            break;
        }
    }
    ensure!(
        seen == 1000 && pages == 10,
        "{seen} items over {pages} pages"
    );
    wait_until(Duration::from_secs(20), "kubelet's list committed", || {
        http::get(gateway.hub, "/v1/cache")
            .is_ok_and(|r| r.body.contains(&format!("\"namespace\":\"{ns}\"")))
    })?;
    gateway.stop(Duration::from_secs(5));

    use edgegate::cache::{RedbStore, ResourceKey, Store};
    let store = RedbStore::open(&gateway.dir.join("cache"))?;
    let resource = ResourceKey {
        component: "kubelet".into(),
        resource: "configmaps".into(),
        version: "v1".into(),
        group: String::new(),
    };
    let sets = store.sets("kubelet/")?;
    ensure!(
        sets.len() == 1 && sets[0].1.items == 1000,
        "one set of 1000: {sets:?}"
    );
    let cached = store.scan(&resource.namespace_prefix(&ns))?.count();
    ensure!(cached == 1000, "{cached} objects cached");
    Ok(())
}

/// A component not served for `--cache-gc-after` of the gateway's running time loses its
/// cache; the time the gateway was off does not count.
pub fn unused_components_are_collected(env: &Env) -> Result<()> {
    let mut gateway = env.gateway(&["--cache-gc-after=2s"])?;
    let ns = namespace(&env.cluster, "gc")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "gc", 3))?;
    rt.block_on(list_as(
        &client,
        &format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url()),
        KUBELET,
    ))?;
    crate::support::wait_sets(gateway.hub, "kubelet", 1)?;
    gateway.stop(Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(3));
    gateway.restart()?;
    // Collection runs at start; give it the 3 s of running time that make kubelet's cache
    // collectable at the next start.
    std::thread::sleep(Duration::from_secs(3));
    ensure!(
        crate::support::metric(gateway.hub, "edgegate_cache_collected_components_total")? == 0.0,
        "the 3 s the gateway was off must not count towards collecting kubelet's cache"
    );
    gateway.stop(Duration::from_secs(5));
    gateway.restart()?;
    wait_metric(
        gateway.hub,
        "edgegate_cache_collected_components_total",
        1.0,
    )
    .context("kubelet's cache, unused for 3 s of running time, is collected at start")?;
    Ok(())
}
