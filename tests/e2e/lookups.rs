//! How a watch follows what its filters look up: a change ends the watches whose filters
//! read the object that changed, and no other.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{Gateway, process::wait_until};

use crate::support::{Env, Watch, client, list_as, runtime, unique, wait_readyz};
use crate::topology::{KUBE_PROXY, endpoints, filter_dir, services_and_slices};

/// A change to what filters look up ends the watches whose filters read it, and only those:
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
    let gateway = Gateway::start(
        &env.bin,
        &env.cluster,
        &[
            &format!("--filter-dir={}", filters.display()),
            &format!("--node-name={}", nodes[0]),
        ],
    )?;
    wait_readyz(&gateway, 200, "the gateway to be ready (informers synced)")?;
    let rt = runtime();
    let client = client();
    let slices = format!(
        "{}/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices",
        gateway.url()
    );
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
