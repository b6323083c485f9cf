//! A flapping edge link: the link to the cloud goes down and up, every 2 s and then at random
//! intervals, while 200 kube-rs reflectors of two kinds and four components watch through
//! the gateway and the cloud churns.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::ADMIN_TOKEN;
use edgegate_testkit::process::wait_until;
use futures_util::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};

use crate::crash::random_below;
use crate::support::{Env, Plain, client, create_configmaps, get, namespace, request, runtime};

const REFLECTORS: usize = 200;
const CONFIGMAPS: usize = 60;
const SERVICES: usize = 10;
/// The components the reflectors speak as (cached, as `--cache-agents` says).
const AGENTS: [&str; 4] = ["flap-a", "flap-b", "flap-c", "flap-d"];
/// Changes the cloud makes a second while the link flaps.
const CHURN_PER_SECOND: u64 = 20;

/// How long the link flaps: 40 s in the suite, `EDGEGATE_FLAP_SECONDS` for longer runs.
fn flapping_for() -> Duration {
    let seconds = std::env::var("EDGEGATE_FLAP_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    Duration::from_secs(seconds)
}

/// The kind and plural reflector `i` watches.
fn kind_of(i: usize) -> (&'static str, &'static str) {
    if i % 4 == 3 {
        ("Service", "services")
    } else {
        ("ConfigMap", "configmaps")
    }
}

/// What one reflector holds and has seen.
#[derive(Default)]
struct Seen {
    /// `kind/name → resourceVersion`, as its store holds them.
    store: BTreeMap<String, u64>,
    /// The objects of a re-list in progress.
    listing: BTreeMap<String, u64>,
    /// The highest resourceVersion seen of each object, deleted ones included.
    highest: BTreeMap<String, u64>,
    /// Objects seen at a lower resourceVersion than before.
    backwards: Vec<String>,
    relists: usize,
    /// What it was told, in order, for a failure's message.
    log: Vec<String>,
}

impl Seen {
    fn saw(&mut self, key: &str, rv: u64) {
        let highest = self.highest.entry(key.to_owned()).or_default();
        if rv < *highest {
            self.backwards
                .push(format!("{key} at {rv} after {highest}"));
        }
        *highest = rv.max(*highest);
    }

    fn step(&mut self, kind: &str, event: watcher::Event<DynamicObject>) {
        let key_rv = |object: &DynamicObject| {
            let key = format!(
                "{kind}/{}",
                object.metadata.name.as_deref().unwrap_or_default()
            );
            let rv = object
                .metadata
                .resource_version
                .as_deref()
                .and_then(|rv| rv.parse().ok())
                .unwrap_or_default();
            (key, rv)
        };
        let line = match &event {
            watcher::Event::Apply(o) => format!("apply {}@{}", key_rv(o).0, key_rv(o).1),
            watcher::Event::Delete(o) => format!("delete {}@{}", key_rv(o).0, key_rv(o).1),
            watcher::Event::Init => "init".to_owned(),
            watcher::Event::InitApply(o) => format!("list {}@{}", key_rv(o).0, key_rv(o).1),
            watcher::Event::InitDone => "listed".to_owned(),
        };
        self.log.push(line);
        match event {
            watcher::Event::Apply(object) => {
                let (key, rv) = key_rv(&object);
                self.saw(&key, rv);
                self.store.insert(key, rv);
            }
            watcher::Event::Delete(object) => {
                let (key, rv) = key_rv(&object);
                self.saw(&key, rv);
                self.store.remove(&key);
            }
            watcher::Event::Init => self.listing.clear(),
            watcher::Event::InitApply(object) => {
                let (key, rv) = key_rv(&object);
                self.saw(&key, rv);
                self.listing.insert(key, rv);
            }
            watcher::Event::InitDone => {
                self.store = std::mem::take(&mut self.listing);
                self.relists += 1;
            }
        }
    }
}

/// 200 reflectors (ConfigMaps and Services of one namespace, as four cached components)
/// watch through a gateway whose link to the cloud is cut and restored every 2 s, then at
/// random intervals, for 40 s while the cloud changes 20 objects a second. Afterwards every
/// reflector's store equals the cloud's, object by object and resourceVersion by
/// resourceVersion; no reflector saw an object's resourceVersion go backwards; the gateway's
/// file descriptors, threads and RSS come back to what they were before the flapping, within
/// a margin.
pub fn reflectors_converge_after_a_flapping_link(env: &Env) -> Result<()> {
    let ns = namespace(&env.cluster, "flap")?;
    let admin = env.gateway(&[])?;
    let relay = edgegate_testkit::Relay::start(([127, 0, 0, 1], env.cluster.port).into())?;
    let agents = format!("--cache-agents={}", AGENTS.join(","));
    let mut gateway = edgegate_testkit::Gateway::start_to(
        &env.bin,
        &env.cluster,
        &relay.url(),
        &["--heartbeat-interval-seconds=1", &agents],
    )?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(
        &client,
        &admin.url(),
        &ns,
        "cm",
        CONFIGMAPS,
    ))?;
    for i in 0..SERVICES {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"svc-{i}"}},"spec":{{"ports":[{{"port":80}}]}}}}"#
        );
        let url = format!("{}/api/v1/namespaces/{ns}/services", admin.url());
        let response = rt.block_on(client.request(request(
            ::http::Method::POST,
            &url,
            Some(ADMIN_TOKEN),
            "e2e/v1",
            Some(&body),
        )?))?;
        ensure!(response.status() == 201, "service: {}", response.status());
    }

    let seen: Vec<Arc<Mutex<Seen>>> = (0..REFLECTORS).map(|_| Arc::default()).collect();
    let reflectors = rt.block_on(async {
        let mut reflectors = Vec::new();
        for (i, seen) in seen.iter().enumerate() {
            let (kind, plural) = kind_of(i);
            let agent = format!("{}/v1", AGENTS[i % AGENTS.len()]);
            let mut config = kube::Config::new(gateway.url().parse()?);
            config.auth_info.token = Some(ADMIN_TOKEN.to_owned().into());
            config
                .headers
                .push((::http::header::USER_AGENT, agent.parse()?));
            let kube_client = kube::Client::try_from(config)?;
            let resource =
                ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", kind), plural);
            let api: kube::Api<DynamicObject> =
                kube::Api::namespaced_with(kube_client, &ns, &resource);
            let seen = seen.clone();
            reflectors.push(tokio::spawn(async move {
                let events = watcher(api, watcher::Config::default()).default_backoff();
                futures_util::pin_mut!(events);
                while let Some(event) = events.next().await {
                    if let Ok(event) = event {
                        seen.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .step(kind, event);
                    }
                }
            }));
        }
        anyhow::Ok(reflectors)
    })?;
    let all_listed = || {
        seen.iter()
            .all(|s| s.lock().unwrap_or_else(|p| p.into_inner()).relists > 0)
    };
    wait_until(
        Duration::from_secs(60),
        "every reflector to list",
        all_listed,
    )?;
    std::thread::sleep(Duration::from_secs(2));
    let pid = gateway.process().context("the gateway runs")?.pid();
    let before = Usage::of(pid)?;

    let stop = Arc::new(AtomicBool::new(false));
    let churn = rt.spawn(churn(client.clone(), admin.url(), ns.clone(), stop.clone()));
    let flapping = flapping_for();
    let started = Instant::now();
    let mut cuts = 0;
    while started.elapsed() < flapping {
        let (down, up) = if started.elapsed() < flapping / 2 {
            (Duration::from_secs(2), Duration::from_secs(2))
        } else {
            let spread = Duration::from_millis(3800);
            (
                Duration::from_millis(200) + random_below(spread),
                Duration::from_millis(200) + random_below(spread),
            )
        };
        relay.cut();
        cuts += 1;
        std::thread::sleep(down);
        relay.restore();
        std::thread::sleep(up);
    }
    stop.store(true, Ordering::SeqCst);
    let changes = rt.block_on(churn)??;

    let truth = rt.block_on(cloud(&client, &admin.url(), &ns))?;
    let converged = Instant::now();
    let stores_match = || {
        seen.iter().enumerate().all(|(i, s)| {
            let (kind, _) = kind_of(i);
            let wanted: BTreeMap<&String, &u64> = truth
                .iter()
                .filter(|(key, _)| key.starts_with(&format!("{kind}/")))
                .collect();
            let seen = s.lock().unwrap_or_else(|p| p.into_inner());
            seen.store.iter().collect::<BTreeMap<_, _>>() == wanted
        })
    };
    let outcome = wait_until(
        Duration::from_secs(180),
        "every reflector's store to equal the cloud",
        stores_match,
    );
    let convergence = converged.elapsed();
    if let Err(error) = outcome {
        let sets = edgegate_testkit::http::get(gateway.hub, "/v1/cache")
            .map(|r| r.body)
            .unwrap_or_default();
        return Err(error.context(format!(
            "{}\nthe gateway's sets: {sets}",
            differences(&seen, &truth)
        )));
    }
    let backwards: Vec<String> = seen
        .iter()
        .flat_map(|s| {
            s.lock()
                .unwrap_or_else(|p| p.into_inner())
                .backwards
                .clone()
        })
        .collect();
    ensure!(
        backwards.is_empty(),
        "{} object(s) seen going back in resourceVersion, e.g. {:?}",
        backwards.len(),
        &backwards[..backwards.len().min(5)]
    );
    // What the flapping left idle goes by itself, not at once: the keep-alive connections
    // the clients opened meanwhile when the gateway's header read timeout (30 s) closes
    // them, tokio's idle blocking threads after 10 s. Wait for it; a leak never settles.
    let settling = Instant::now();
    let settled = |usage: &Usage| {
        usage.fds <= before.fds + 16
            && usage.threads <= before.threads + 4
            && usage.rss_kib <= before.rss_kib + 32 * 1024
    };
    let _ = wait_until(
        Duration::from_secs(60),
        "the gateway's fds, threads and RSS to settle",
        || Usage::of(pid).is_ok_and(|usage| settled(&usage)),
    );
    let settling = settling.elapsed();
    let after = Usage::of(pid)?;
    let relists: usize = seen
        .iter()
        .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).relists)
        .sum();
    println!(
        "{cuts} cuts in {flapping:?}, {changes} changes in the cloud, {REFLECTORS} reflectors ({relists} lists): every store equal to the cloud {convergence:?} after the last restore, no resourceVersion backwards; gateway before → after: {before} → {after} ({settling:.1?} later)"
    );
    for reflector in reflectors {
        reflector.abort();
    }
    ensure!(
        after.fds <= before.fds + 16,
        "file descriptors grew: {before} → {after}"
    );
    ensure!(
        after.threads <= before.threads + 4,
        "threads grew: {before} → {after}"
    );
    ensure!(
        after.rss_kib <= before.rss_kib + 32 * 1024,
        "RSS grew: {before} → {after}"
    );
    gateway.stop(Duration::from_secs(5));
    Ok(())
}

/// Changes ConfigMaps and Services of `ns` through `admin` (straight to the cloud) until
/// `stop`: 20 a second, every tenth a ConfigMap created and the one created before deleted.
async fn churn(client: Plain, admin: String, ns: String, stop: Arc<AtomicBool>) -> Result<u64> {
    let mut changes = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / CHURN_PER_SECOND));
    while !stop.load(Ordering::SeqCst) {
        tick.tick().await;
        let n = changes as usize;
        if n % 10 == 9 {
            // A ConfigMap comes, and the one that came ten changes ago goes.
            create_configmaps(&client, &admin, &ns, &format!("new{n}"), 1).await?;
            changes += 1;
            if n < 19 {
                continue;
            }
        }
        let (method, url, body) = if n % 10 == 9 {
            let url = format!("{admin}/api/v1/namespaces/{ns}/configmaps/new{}-0", n - 10);
            (::http::Method::DELETE, url, None)
        } else if n % 10 == 4 {
            let url = format!(
                "{admin}/api/v1/namespaces/{ns}/services/svc-{}",
                n % SERVICES
            );
            let body = format!(r#"{{"metadata":{{"annotations":{{"churn":"{n}"}}}}}}"#);
            (::http::Method::PATCH, url, Some(body))
        } else {
            let url = format!(
                "{admin}/api/v1/namespaces/{ns}/configmaps/cm-{}",
                n % CONFIGMAPS
            );
            let body = format!(r#"{{"data":{{"churn":"{n}"}}}}"#);
            (::http::Method::PATCH, url, Some(body))
        };
        let mut req = request(method, &url, Some(ADMIN_TOKEN), "e2e/v1", body.as_deref())?;
        req.headers_mut().insert(
            "content-type",
            ::http::HeaderValue::from_static("application/merge-patch+json"),
        );
        let response = client.request(req).await?;
        ensure!(
            response.status().is_success(),
            "{url}: {}",
            response.status()
        );
        changes += 1;
    }
    Ok(changes)
}

/// How the reflectors that differ from `truth` differ, for a failure's message.
fn differences(seen: &[Arc<Mutex<Seen>>], truth: &BTreeMap<String, u64>) -> String {
    let mut out = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        let (kind, _) = kind_of(i);
        let s = s.lock().unwrap_or_else(|p| p.into_inner());
        let wanted: BTreeMap<&String, &u64> = truth
            .iter()
            .filter(|(key, _)| key.starts_with(&format!("{kind}/")))
            .collect();
        let missing: Vec<_> = wanted
            .keys()
            .filter(|k| !s.store.contains_key(**k))
            .collect();
        let extra: Vec<_> = s.store.keys().filter(|k| !wanted.contains_key(k)).collect();
        let stale: Vec<_> = s
            .store
            .iter()
            .filter(|(k, rv)| wanted.get(k).is_some_and(|w| *w != *rv))
            .map(|(k, rv)| format!("{k}@{rv} (cloud {})", wanted[k]))
            .collect();
        if !(missing.is_empty() && extra.is_empty() && stale.is_empty()) {
            let odd: Vec<&String> = missing
                .iter()
                .map(|k| **k)
                .chain(extra.iter().copied())
                .collect();
            let told: Vec<&String> = s
                .log
                .iter()
                .filter(|line| odd.iter().any(|k| line.contains(k.as_str())))
                .collect();
            out.push(format!(
                "reflector {i} ({}, {kind}, {} lists): missing {missing:?}, extra {extra:?}, stale {stale:?}; told of them: {told:?}; last told: {:?}",
                AGENTS[i % AGENTS.len()],
                s.relists,
                &s.log[s.log.len().saturating_sub(3)..]
            ));
        }
    }
    format!(
        "{} reflector(s) differ: {}",
        out.len(),
        out[..out.len().min(4)].join("; ")
    )
}

/// `kind/name → resourceVersion` of the ConfigMaps and Services of `ns` in the cloud.
async fn cloud(client: &Plain, admin: &str, ns: &str) -> Result<BTreeMap<String, u64>> {
    let mut truth = BTreeMap::new();
    for (kind, plural) in [("ConfigMap", "configmaps"), ("Service", "services")] {
        let (status, body) =
            get(client, &format!("{admin}/api/v1/namespaces/{ns}/{plural}")).await?;
        ensure!(status == 200, "{plural}: {status}");
        let list: serde_json::Value = serde_json::from_slice(&body)?;
        for item in list["items"].as_array().context("a list")? {
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            let rv = item["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|rv| rv.parse().ok())
                .unwrap_or_default();
            truth.insert(format!("{kind}/{name}"), rv);
        }
    }
    Ok(truth)
}

/// A process's file descriptors, threads and resident memory.
struct Usage {
    fds: usize,
    threads: usize,
    rss_kib: u64,
}

impl Usage {
    fn of(pid: u32) -> Result<Usage> {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
        let threads = std::fs::read_dir(format!("/proc/{pid}/task"))?.count();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss_kib = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("VmRSS")?;
        Ok(Usage {
            fds,
            threads,
            rss_kib,
        })
    }
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} fds, {} threads, {:.1} MiB",
            self.fds,
            self.threads,
            self.rss_kib as f64 / 1024.0
        )
    }
}
