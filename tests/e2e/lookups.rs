//! How a watch follows what its filters look up: a change re-filters, on the open watches
//! the multiplexer serves, just the objects whose filtering read it; it ends the other
//! watches whose filters read it, and no other.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{Cluster, Gateway, process::wait_until};

use crate::support::{Env, Watch, apply, client, list_as, runtime, unique, wait_readyz};
use crate::topology::{KUBE_PROXY, endpoints, filter_dir, nodes_and_pools, services_and_slices};

/// A change to what filters look up ends the upstream watches (not served from the
/// multiplexer's shared state: its default EndpointSlices are `v1`, this cluster's
/// `v1beta1`) whose filters read it, and only those:
/// a topology given to a Service no EndpointSlice belongs to (which servicetopology never
/// looked up) leaves kube-proxy's EndpointSlice watch open; removing the topology of a
/// Service it did look up ends that watch with 410 Expired and the re-list shows every
/// endpoint, while a watch through a filter that looks nothing up (tagger) stays open.
pub fn a_lookup_change_ends_only_the_watches_that_read_it(env: &Env) -> Result<()> {
    let scratch = env.cluster.dir.join(unique("lookups"));
    let filters = filter_dir(&scratch, &["servicetopology", "tagger"])?;
    std::fs::write(filters.join("tagger.toml"), "[config]\ntag = \"t\"\n")?;
    let nodes = [&*unique("edge"), "elsewhere-1", "elsewhere-2"];
    let ns = crate::support::namespace(&env.cluster, "lookups")?;
    services_and_slices(&env.cluster, &scratch, &ns, nodes)?;
    let (gateway, slices) = filtering(env, &env.cluster, (&filters, nodes[0]), &ns, &[])?;
    let rt = runtime();
    let client = client();
    let configmaps = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let by_node = |items: &[serde_json::Value]| endpoints(items).remove("by-node-x");
    let mut seen = None;
    wait_until(Duration::from_secs(15), "kube-proxy's view by node", || {
        seen = rt
            .block_on(list_as(&client, &slices, KUBE_PROXY))
            .ok()
            .and_then(|(_, items)| by_node(&items));
        seen == Some(vec!["10.0.0.1".to_owned()])
    })
    .with_context(|| format!("kube-proxy sees {seen:?} of by-node"))?;

    let (rv, _) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    let mut proxy_watch = rt.block_on(Watch::open(
        &client,
        &format!("{slices}?watch=true&resourceVersion={rv}"),
        KUBE_PROXY,
    ))?;
    let (rv, _) = rt.block_on(list_as(&client, &configmaps, "test/v1"))?;
    let mut tagged_watch = rt.block_on(Watch::open(
        &client,
        &format!("{configmaps}?watch=true&resourceVersion={rv}"),
        "test/v1",
    ))?;

    // A Service no slice names: servicetopology never read it.
    let unread = Instant::now();
    env.cluster.kubectl(&[
        "annotate",
        "service",
        "lb-kept",
        "-n",
        &ns,
        "openyurt.io/topologyKeys=kubernetes.io/hostname",
    ])?;
    // Past the 5 s over which lookup-change ends are spread, kube-proxy's watch still delivers.
    std::thread::sleep(Duration::from_secs(6).saturating_sub(unread.elapsed()));
    env.cluster
        .kubectl(&["label", "endpointslice", "plain-x", "-n", &ns, "seen=yes"])?;
    let event = rt
        .block_on(proxy_watch.next(Duration::from_secs(10)))?
        .context("kube-proxy's watch ended without a word")?;
    ensure!(
        event["type"] == "MODIFIED" && event["object"]["metadata"]["name"] == "plain-x",
        "a change to a Service its filters never read leaves kube-proxy's watch open: {event}"
    );

    let changed = Instant::now();
    env.cluster.kubectl(&[
        "annotate",
        "service",
        "by-node",
        "-n",
        &ns,
        "openyurt.io/topologyKeys-",
    ])?;
    let event = rt
        .block_on(proxy_watch.next(Duration::from_secs(15)))?
        .context("kube-proxy's watch ended without a word")?;
    ensure!(
        event["type"] == "ERROR" && event["object"]["code"] == 410,
        "kube-proxy's watch is told to re-list: {event}"
    );
    let (_, items) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    ensure!(
        by_node(&items).is_some_and(|e| e.len() == 3),
        "the re-list is filtered anew: {:?}",
        by_node(&items)
    );
    // Past the 5 s over which lookup-change ends are spread, the tagged watch still delivers.
    let spread = Duration::from_secs(6);
    std::thread::sleep(spread.saturating_sub(changed.elapsed()));
    env.cluster
        .kubectl(&["create", "configmap", "after", "-n", &ns])?;
    let event = rt
        .block_on(tagged_watch.next(Duration::from_secs(10)))?
        .context("the tagged watch ended")?;
    ensure!(
        event["type"] == "ADDED" && event["object"]["metadata"]["name"] == "after",
        "a watch whose filters look nothing up is left open: {event}"
    );
    Ok(())
}

/// On a watch the multiplexer serves, a lookup change re-filters what read it instead, at a
/// resourceVersion never older than the watch's, with no 410 and no re-list: a topology
/// given to a Service no EndpointSlice belongs to sends nothing; taking the topology of
/// `by-node`'s Service away sends `by-node-x` again with every endpoint, and giving it back
/// pruned again; edge-2 leaving this node's NodePool sends `by-pool-x` again without it.
/// This node's own pool label changing changes its filters' context: the watch ends (410),
/// and the re-list shows the new pool's endpoints.
pub fn a_lookup_change_refilters_the_served_watches_in_place(env: &Env) -> Result<()> {
    let cluster = env.private_cluster()?;
    let scratch = cluster.dir.join("refilter");
    std::fs::create_dir_all(&scratch)?;
    let filters = filter_dir(&scratch, &["servicetopology"])?;
    let nodes = ["edge-1", "edge-2", "edge-3"];
    nodes_and_pools(&cluster, &scratch, nodes)?;
    let ns = crate::support::namespace(&cluster, "refilter")?;
    services_and_slices(&cluster, &scratch, &ns, nodes)?;
    let (gateway, slices) = filtering(
        env,
        &cluster,
        (&filters, "edge-1"),
        &ns,
        &["--pool-scope-resources=/v1/services,discovery.k8s.io/v1beta1/endpointslices"],
    )?;
    let rt = runtime();
    let client = client();
    let view = |items: &[serde_json::Value]| {
        let mut all = endpoints(items);
        (all.remove("by-node-x"), all.remove("by-pool-x"))
    };
    let addresses = |hosts: &[u8]| Some(hosts.iter().map(|h| format!("10.0.0.{h}")).collect());
    let mut seen = (None, None);
    wait_until(
        Duration::from_secs(15),
        "kube-proxy's view by node and pool",
        || {
            seen = rt
                .block_on(list_as(&client, &slices, KUBE_PROXY))
                .map(|(_, items)| view(&items))
                .unwrap_or_default();
            seen == (addresses(&[1]), addresses(&[1, 2]))
        },
    )
    .with_context(|| format!("kube-proxy sees {seen:?} by node and pool"))?;
    let (rv, _) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    let mut last: u64 = rv.parse().context("the list's resourceVersion")?;
    let mut watch = rt.block_on(Watch::open(
        &client,
        &format!("{slices}?watch=true&resourceVersion={rv}"),
        KUBE_PROXY,
    ))?;
    let served = crate::support::metric_sample(
        gateway.hub,
        "edgegate_multiplexer_answers_total{resource=\"discovery.k8s.io/v1beta1/endpointslices\",verb=\"watch\"}",
    )?;
    ensure!(served >= 1.0, "the watch is served from the shared state");
    // Events until `slice` shows `hosts` (or, for `None`, an ERROR). Objects may be sent
    // again before that (what a lookup change of the gateway's start touched, before the
    // watch's view was settled): only ever as MODIFIED, never at an older resourceVersion.
    let mut until =
        |watch: &mut Watch, slice: &str, hosts: Option<&[u8]>| -> Result<serde_json::Value> {
            loop {
                let event = rt
                    .block_on(watch.next(Duration::from_secs(15)))
                    .with_context(|| format!("waiting for {slice} to show {hosts:?}"))?
                    .with_context(|| format!("the watch ended before {slice} showed {hosts:?}"))?;
                if event["type"] == "ERROR" {
                    return Ok(event);
                }
                let version: u64 = event["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .with_context(|| format!("{event} has a resourceVersion"))?;
                ensure!(
                    version >= last,
                    "{event}: the resourceVersion goes back from {last}"
                );
                last = version;
                ensure!(event["type"] == "MODIFIED", "only MODIFIED events: {event}");
                let shows = endpoints(std::slice::from_ref(&event["object"])).remove(slice);
                if hosts.is_some_and(|hosts| shows == addresses(hosts)) {
                    return Ok(event);
                }
            }
        };
    let modified = |event: &serde_json::Value, slice: &str, hosts: &[u8]| {
        event["type"] == "MODIFIED"
            && endpoints(std::slice::from_ref(&event["object"])).remove(slice) == addresses(hosts)
    };

    // A Service no slice names: nothing read it, nothing is sent; then the topology of
    // by-node's Service taken away and given back.
    let annotate = |service: &str, annotation: &str| {
        cluster.kubectl(&[
            "annotate",
            "--overwrite",
            "service",
            service,
            "-n",
            &ns,
            annotation,
        ])
    };
    annotate("lb-kept", "openyurt.io/topologyKeys=kubernetes.io/hostname")?;
    annotate("by-node", "openyurt.io/topologyKeys-")?;
    let event = until(&mut watch, "by-node-x", Some(&[1, 2, 3]))?;
    ensure!(
        modified(&event, "by-node-x", &[1, 2, 3]),
        "the Service's edit sends its slice again, filtered anew: {event}"
    );
    // An edit no filter uses (an annotation of by-node's Service), then the topology given
    // back: the two reach the gateway in order, so the first event is by-node-x pruned; what
    // the first sent again, as this watch was shown it, was held back.
    annotate("by-node", "example.com/churn=1")?;
    annotate("by-node", "openyurt.io/topologyKeys=kubernetes.io/hostname")?;
    let event = rt
        .block_on(watch.next(Duration::from_secs(15)))?
        .context("the watch ended")?;
    ensure!(
        modified(&event, "by-node-x", &[1]),
        "the first event after an edit no filter uses and the topology given back: {event}"
    );

    // edge-2 leaves this node's pool.
    apply(
        &cluster,
        &scratch,
        "hangzhou.json",
        r#"{"apiVersion":"apps.openyurt.io/v1beta1","kind":"NodePool","metadata":{"name":"hangzhou"},"spec":{"type":"Edge"},"status":{"nodes":["edge-1"]}}"#,
    )?;
    let event = until(&mut watch, "by-pool-x", Some(&[1]))?;
    ensure!(
        modified(&event, "by-pool-x", &[1]),
        "the pool's change re-filters its slice: {event}"
    );

    // This node moves to shanghai: its filters' context changes, the watch ends.
    cluster.kubectl(&[
        "label",
        "--overwrite",
        "node",
        "edge-1",
        "apps.openyurt.io/nodepool=shanghai",
    ])?;
    let event = until(&mut watch, "none", None)?;
    ensure!(
        event["type"] == "ERROR" && event["object"]["code"] == 410,
        "a new pool for this node ends the watch: {event}"
    );
    let (_, items) = rt.block_on(list_as(&client, &slices, KUBE_PROXY))?;
    ensure!(
        view(&items) == (addresses(&[1]), addresses(&[1, 3])),
        "the re-list is filtered for shanghai: {:?}",
        view(&items)
    );
    an_edit_no_filter_uses_sends_nothing(&cluster, &ns, &gateway, &slices)
}

/// A fresh watch, from a list after every lookup change so far, is sent nothing for an edit
/// of a Service its slices' filtering read that no filter uses: the objects sent again are
/// held back, as their filters make of them what they made for the list, though the watch
/// has not been sent them. The next event it gets is a change made after the edit.
fn an_edit_no_filter_uses_sends_nothing(
    cluster: &Cluster,
    ns: &str,
    gateway: &Gateway,
    slices: &str,
) -> Result<()> {
    let (rt, client) = (runtime(), client());
    let label = |value: &str| {
        cluster.kubectl(&[
            "label",
            "--overwrite",
            "endpointslice",
            "by-pool-x",
            "-n",
            ns,
            &format!("example.com/marker={value}"),
        ])
    };
    // A change after the lookup changes so far: a list from it is not sent them again.
    label("0")?;
    let mut listed = None;
    wait_until(
        Duration::from_secs(15),
        "a list with the labelled slice",
        || {
            listed = rt.block_on(list_as(&client, slices, KUBE_PROXY)).ok();
            listed.as_ref().is_some_and(|(_, items)| {
                items
                    .iter()
                    .any(|item| item["metadata"]["labels"]["example.com/marker"] == "0")
            })
        },
    )?;
    let (rv, _) = listed.context("listed")?;
    let mut watch = rt.block_on(Watch::open(
        &client,
        &format!("{slices}?watch=true&resourceVersion={rv}"),
        KUBE_PROXY,
    ))?;
    let resends = || {
        crate::support::metric_sample(
            gateway.hub,
            "edgegate_multiplexer_resends_total{resource=\"discovery.k8s.io/v1beta1/endpointslices\"}",
        )
    };
    let before = resends()?;
    cluster.kubectl(&[
        "annotate",
        "--overwrite",
        "service",
        "by-node",
        "-n",
        ns,
        "example.com/churn=2",
    ])?;
    wait_until(
        Duration::from_secs(15),
        "the edit's slices sent again",
        || resends().is_ok_and(|after| after > before),
    )?;
    label("1")?;
    let event = rt
        .block_on(watch.next(Duration::from_secs(15)))?
        .context("the watch ended")?;
    ensure!(
        event["type"] == "MODIFIED"
            && event["object"]["metadata"]["labels"]["example.com/marker"] == "1",
        "the first event after the edit is the slice labelled after it: {event}"
    );
    Ok(())
}

/// A gateway on `cluster` filtering with the filters of `dir` as `node` (and `flags`), ready
/// (its informers synced), and the URL of namespace `ns`'s `v1beta1` EndpointSlices through it.
fn filtering(
    env: &Env,
    cluster: &Cluster,
    (dir, node): (&std::path::Path, &str),
    ns: &str,
    flags: &[&str],
) -> Result<(Gateway, String)> {
    let filter_dir = format!("--filter-dir={}", dir.display());
    let node_name = format!("--node-name={node}");
    let gateway = Gateway::start(
        &env.bin,
        cluster,
        &[&[filter_dir.as_str(), node_name.as_str()], flags].concat(),
    )?;
    wait_readyz(&gateway, 200, "the gateway to be ready (informers synced)")?;
    let slices = format!(
        "{}/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices",
        gateway.url()
    );
    Ok((gateway, slices))
}
