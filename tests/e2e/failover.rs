//! Two kube-apiservers on one etcd, one killed under a load of gets, lists and watches: the
//! gateway sends what the dead one cannot answer to the other, in every lb mode, and no
//! client request fails.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{ADMIN_TOKEN, Gateway};

use crate::support::{Env, Plain, Watch, client, get, metric_sample, namespace, request, runtime};

/// Readers per gateway, each a get and a list after another.
const READERS: usize = 4;
/// ConfigMaps the watchers must see created while the load runs.
const CREATED: usize = 20;

/// One request of the load: when it began after the kill (negative before), how long it
/// took, and what went wrong.
struct Outcome {
    began: f64,
    took: Duration,
    failure: Option<String>,
}

/// rr and priority gateways in front of apiservers A and B; A is killed mid-load. Every get,
/// list and watch (re)open through either gateway succeeds, each watcher sees every
/// ConfigMap created through B without a gap, and a write after A died succeeds.
/// The probes are 60 s apart: only the requests themselves can have taken A out in time.
pub fn a_killed_apiserver_fails_no_request(env: &Env) -> Result<()> {
    let a = env.private_cluster()?;
    let b = a.replica()?;
    let ns = namespace(&a, "failover")?;
    let servers = format!("{},{}", a.url(), b.url());
    let slow_probes = "--heartbeat-interval-seconds=60";
    let gateways = [
        Gateway::start_to(&env.bin, &a, &servers, &["--lb-mode=rr", slow_probes])?,
        Gateway::start_to(&env.bin, &a, &servers, &["--lb-mode=priority", slow_probes])?,
    ];
    // A gateway that sends nothing but its own watch of yurt-hub-cfg until A is dead: a
    // write through it is sent on to B, whether its refused connect, that watch's return
    // finding A dead, or both at once come first (`server::failover`'s tests pin each).
    let idle = Gateway::start_to(&env.bin, &a, &servers, &["--lb-mode=priority", slow_probes])?;
    let rt = runtime();
    let client = client();
    a.kubectl(&[
        "create",
        "configmap",
        "seed",
        "-n",
        &ns,
        "--from-literal=k=v",
    ])?;

    let stop = Arc::new(AtomicBool::new(false));
    let killed_at: Arc<std::sync::OnceLock<Instant>> = Arc::default();
    let mut loads = Vec::new();
    for gateway in &gateways {
        let base = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                rt.spawn(read_loop(
                    client.clone(),
                    base.clone(),
                    stop.clone(),
                    killed_at.clone(),
                ))
            })
            .collect();
        let watcher = rt.spawn(watch_loop(client.clone(), base.clone(), stop.clone()));
        loads.push((readers, watcher));
    }
    std::thread::sleep(Duration::from_secs(3));
    a.kill_apiserver()?;
    let _ = killed_at.set(Instant::now());

    let write_url = format!("{}/api/v1/namespaces/{ns}/configmaps", idle.url());
    let (status, body) = rt.block_on(post_configmap(&client, &write_url, "after-the-kill"))?;
    ensure!(
        status == 201,
        "a write through a gateway that had not seen A die: {status} {}",
        String::from_utf8_lossy(&body)
    );

    // Created through B while the load runs: each watcher must see them all.
    let direct = format!("{}/api/v1/namespaces/{ns}/configmaps", b.url());
    let mut created = BTreeSet::new();
    for i in 0..CREATED {
        let name = format!("during-{i}");
        b.kubectl(&[
            "create",
            "configmap",
            &name,
            "-n",
            &ns,
            "--from-literal=k=v",
        ])
        .with_context(|| format!("creating {name} on B ({direct})"))?;
        created.insert(name);
        std::thread::sleep(Duration::from_millis(100));
    }
    // The reads go on a little after the last create; the watchers, until they saw it.
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Release);

    let modes = ["rr", "priority"];
    for (((readers, watcher), gateway), mode) in loads.into_iter().zip(&gateways).zip(modes) {
        let mut outcomes = Vec::new();
        for reader in readers {
            outcomes.extend(rt.block_on(reader)??);
        }
        let (seen, reopened, watch_failures) = rt.block_on(watcher)??;
        let failed: Vec<&String> = outcomes.iter().filter_map(|o| o.failure.as_ref()).collect();
        let after: Vec<&Outcome> = outcomes
            .iter()
            .filter(|o| o.began + o.took.as_secs_f64() >= 0.0)
            .collect();
        let slowest = after.iter().map(|o| o.took).max().unwrap_or_default();
        let moved = failovers(gateway, &a)?;
        println!(
            "{mode}: {} gets and lists, {} failed; {} answered after the kill, the slowest in \
             {slowest:.0?}; {moved} sent on to B; the watch reopened {reopened} times",
            outcomes.len(),
            failed.len(),
            after.len(),
        );
        ensure!(failed.is_empty(), "{mode}: failed requests: {failed:?}");
        ensure!(
            watch_failures.is_empty(),
            "{mode}: failed watch opens: {watch_failures:?}"
        );
        ensure!(
            !after.is_empty(),
            "{mode}: no request was answered after the kill"
        );
        let missed: Vec<&String> = created.difference(&seen).collect();
        ensure!(missed.is_empty(), "{mode}: the watch missed {missed:?}");
        ensure!(moved >= 1.0, "{mode}: no request was sent on to B");
        let a_healthy = metric_sample(
            gateway.hub,
            &format!("edgegate_upstream_healthy{{server=\"{}\"}}", a.url()),
        )?;
        ensure!(a_healthy == 0.0, "{mode}: A is still in the rotation");
    }
    Ok(())
}

fn failovers(gateway: &Gateway, from: &edgegate_testkit::Cluster) -> Result<f64> {
    let series = format!(
        "edgegate_upstream_failovers_total{{server=\"{}\"}}",
        from.url()
    );
    metric_sample(gateway.hub, &series)
}

/// Gets the seed ConfigMap and lists the namespace, after another, until `stop`.
async fn read_loop(
    client: Plain,
    base: String,
    stop: Arc<AtomicBool>,
    killed_at: Arc<std::sync::OnceLock<Instant>>,
) -> Result<Vec<Outcome>> {
    let mut outcomes = Vec::new();
    let urls = [format!("{base}/seed"), base.clone()];
    while !stop.load(Ordering::Acquire) {
        for url in &urls {
            let began = Instant::now();
            let answer = get(&client, url).await;
            let took = began.elapsed();
            let failure = match answer {
                Ok((status, _)) if status == 200 => None,
                Ok((status, body)) => Some(format!(
                    "{url}: {status} {}",
                    String::from_utf8_lossy(&body)
                )),
                Err(error) => Some(format!("{url}: {error:#}")),
            };
            let began = killed_at
                .get()
                .map_or(-1.0, |kill| began.duration_since(*kill).as_secs_f64());
            outcomes.push(Outcome {
                began,
                took,
                failure,
            });
        }
    }
    Ok(outcomes)
}

/// Watches the namespace's ConfigMaps from its first list on, reopening from the last
/// version seen whenever the stream ends, until `stop` and every ConfigMap created during
/// the load was seen (or a minute after `stop`, however slow the machine): the names it saw
/// added, how often it reopened, and the opens that failed.
async fn watch_loop(
    client: Plain,
    base: String,
    stop: Arc<AtomicBool>,
) -> Result<(BTreeSet<String>, usize, Vec<String>)> {
    let (status, body) = get(&client, &base).await?;
    ensure!(status == 200, "the first list: {status}");
    let list: serde_json::Value = serde_json::from_slice(&body)?;
    let mut version = list["metadata"]["resourceVersion"]
        .as_str()
        .context("the list's resourceVersion")?
        .to_owned();
    let (mut seen, mut reopened, mut failures) = (BTreeSet::new(), 0usize, Vec::new());
    let mut stopped_at = None;
    let mut done = |seen: &BTreeSet<String>| {
        if !stop.load(Ordering::Acquire) {
            return false;
        }
        let since = *stopped_at.get_or_insert_with(Instant::now);
        let all = (0..CREATED).all(|i| seen.contains(&format!("during-{i}")));
        all || since.elapsed() > Duration::from_secs(60)
    };
    while !done(&seen) {
        let url = format!("{base}?watch=true&resourceVersion={version}&allowWatchBookmarks=true");
        let mut watch = match Watch::open(&client, &url, "e2e-failover/v1").await {
            Ok(watch) => watch,
            Err(error) => {
                failures.push(format!("{error:#}"));
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        loop {
            if done(&seen) {
                break;
            }
            let next = watch.next(Duration::from_secs(3600));
            match tokio::time::timeout(Duration::from_millis(500), next).await {
                // Nothing within the wait: look at whether it is done again.
                Err(_) => continue,
                // The stream ended or broke (its server died): open another.
                Ok(Ok(None) | Err(_)) => break,
                Ok(Ok(Some(event))) => {
                    if let Some(v) = event["object"]["metadata"]["resourceVersion"].as_str() {
                        version = v.to_owned();
                    }
                    if event["type"] == "ADDED"
                        && let Some(name) = event["object"]["metadata"]["name"].as_str()
                    {
                        seen.insert(name.to_owned());
                    }
                }
            }
        }
        reopened += 1;
    }
    Ok((seen, reopened.saturating_sub(1), failures))
}

async fn post_configmap(
    client: &Plain,
    url: &str,
    name: &str,
) -> Result<(http::StatusCode, bytes::Bytes)> {
    use http_body_util::BodyExt;
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"k":"v"}}}}"#
    );
    let sent = request(
        http::Method::POST,
        url,
        Some(ADMIN_TOKEN),
        "e2e-failover/v1",
        Some(&body),
    )?;
    let response = client.request(sent).await?;
    let status = response.status();
    Ok((status, response.into_body().collect().await?.to_bytes()))
}
