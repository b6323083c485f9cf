//! Wasm filters in the response stream of a real kube-apiserver: hostile filters, hot reload
//! under load, watch visibility, and streaming memory through a chain.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{Gateway, http, process::wait_until};

use crate::support::{
    Env, Watch, client, create_configmaps, get_as, list_as, list_json_as, metric, names, namespace,
    runtime, wait_readyz,
};

/// The component the test filters apply to.
const TEST: &str = "test/v1";
/// A component no test filter applies to: "the other clients".
const OTHER: &str = "kubelet/v1.20.2";

/// The filter directory of one gateway.
struct FilterDir {
    path: PathBuf,
    built: PathBuf,
}

impl FilterDir {
    fn new(under: &Path) -> Result<FilterDir> {
        let path = under.join("filters");
        std::fs::create_dir_all(&path)?;
        let built = edgegate_testkit::filters::built(&[
            "looper",
            "membomb",
            "trapper",
            "bloater",
            "tagger",
            "nodestamp",
        ])?;
        Ok(FilterDir { path, built })
    }

    /// Writes `name.toml`, then renames `component.wasm` in as `name.wasm`, as a careful
    /// operator (or a ConfigMap mount) does; returns the moment of the rename.
    fn install(&self, name: &str, component: &str, toml: &str) -> Result<Instant> {
        self.write(&format!("{name}.toml"), toml.as_bytes())?;
        let bytes = std::fs::read(self.built.join(format!("{component}.wasm")))?;
        self.write(&format!("{name}.wasm"), &bytes)
    }

    fn write(&self, file: &str, bytes: &[u8]) -> Result<Instant> {
        let part = self.path.join(format!(".{file}.part"));
        std::fs::write(&part, bytes)?;
        std::fs::rename(&part, self.path.join(file))?;
        Ok(Instant::now())
    }

    fn remove(&self, name: &str) -> Result<Instant> {
        std::fs::remove_file(self.path.join(format!("{name}.wasm")))?;
        let _ = std::fs::remove_file(self.path.join(format!("{name}.toml")));
        Ok(Instant::now())
    }

    fn flag(&self) -> String {
        format!("--filter-dir={}", self.path.display())
    }
}

/// The gateway's live chain (`GET /v1/filters`).
fn chain(gateway: &Gateway) -> Result<serde_json::Value> {
    Ok(serde_json::from_str(
        &http::get(gateway.hub, "/v1/filters")?.body,
    )?)
}

fn generation(gateway: &Gateway) -> Result<u64> {
    chain(gateway)?["generation"]
        .as_u64()
        .context("a generation number")
}

/// Waits for a generation after `previous`; returns it and how long after `since` it was seen.
fn next_generation(gateway: &Gateway, previous: u64, since: Instant) -> Result<(u64, Duration)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = generation(gateway)?;
        if now > previous {
            return Ok((now, since.elapsed()));
        }
        ensure!(
            Instant::now() < deadline,
            "no generation after {previous} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn loaded(gateway: &Gateway, name: &str) -> Result<bool> {
    Ok(chain(gateway)?["filters"]
        .as_array()
        .is_some_and(|filters| filters.iter().any(|f| f["name"] == name)))
}

/// Installs a filter and waits until the gateway serves it.
fn activate(
    gateway: &Gateway,
    dir: &FilterDir,
    name: &str,
    component: &str,
    toml: &str,
) -> Result<()> {
    let before = generation(gateway)?;
    let at = dir.install(name, component, toml)?;
    next_generation(gateway, before, at)?;
    wait_until(Duration::from_secs(10), "the filter to load", || {
        loaded(gateway, name).unwrap_or(false)
    })
}

fn deactivate(gateway: &Gateway, dir: &FilterDir, name: &str) -> Result<()> {
    dir.remove(name)?;
    wait_until(Duration::from_secs(10), "the filter to go", || {
        !loaded(gateway, name).unwrap_or(true)
    })
}

/// Hostile filters, each while other clients keep being served: a loop is stopped at its
/// deadline and its policy applied; a memory bomb hits the cap; a trap recycles the instance
/// and the next call succeeds; an oversized replace is refused; a config that breaks its
/// schema (checked in a child process) and a truncated `.wasm` are rejected, and the
/// previous generation keeps serving.
pub fn hostile_filters_never_stop_the_service(env: &Env) -> Result<()> {
    let scratch = env.cluster.dir.join(crate::support::unique("hostile"));
    let dir = FilterDir::new(&scratch)?;
    let gateway = env.gateway(&[&dir.flag()])?;
    let ns = namespace(&env.cluster, "hostile")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", 3))?;
    env.cluster.kubectl(&[
        "label",
        "configmap",
        "cm-1",
        "-n",
        &ns,
        "edgegate.test/trap=yes",
    ])?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());

    // The other clients: lists as a component no test filter touches, all the while.
    let served = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let background = {
        let (client, url, served, failed) =
            (client.clone(), url.clone(), served.clone(), failed.clone());
        rt.spawn(async move {
            loop {
                match list_as(&client, &url, OTHER).await {
                    Ok((_, items)) if items.len() == 3 => served.fetch_add(1, Ordering::SeqCst),
                    _ => failed.fetch_add(1, Ordering::SeqCst),
                };
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let list = |agent: &str| rt.block_on(list_as(&client, &url, agent));
    let failures = || metric(gateway.hub, "edgegate_filter_failures_total").unwrap_or(0.0);

    let loop_limits = "[limits]\ndeadline-ms = 20\n";
    for (policy, want) in [("keep", 3), ("drop", 0)] {
        activate(
            &gateway,
            &dir,
            "looper",
            "looper",
            &format!("on-error = \"{policy}\"\n{loop_limits}"),
        )?;
        let before = failures();
        let started = Instant::now();
        let (_, items) = list(TEST)?;
        println!(
            "looper on-error={policy}: {} items after {:?}",
            items.len(),
            started.elapsed()
        );
        ensure!(
            items.len() == want,
            "looper on-error={policy}: {} items",
            items.len()
        );
        ensure!(failures() > before, "the stopped calls are counted");
        deactivate(&gateway, &dir, "looper")?;
    }
    activate(
        &gateway,
        &dir,
        "looper",
        "looper",
        &format!("on-error = \"fail\"\n{loop_limits}"),
    )?;
    let (status, body) = rt.block_on(get_as(&client, &format!("{url}/cm-0"), TEST))?;
    let status_body: serde_json::Value = serde_json::from_slice(&body)?;
    ensure!(
        status == 500 && status_body["kind"] == "Status",
        "a fail-closed filter fails a get: {status} {status_body}"
    );
    ensure!(
        list(TEST).is_err(),
        "a fail-closed filter breaks the list off"
    );
    deactivate(&gateway, &dir, "looper")?;

    activate(
        &gateway,
        &dir,
        "membomb",
        "membomb",
        "[limits]\nmemory-mib = 16\n",
    )?;
    let before = failures();
    let (_, items) = list(TEST)?;
    ensure!(
        items.len() == 3 && failures() > before,
        "the memory bomb is capped and its objects kept"
    );
    deactivate(&gateway, &dir, "membomb")?;

    activate(
        &gateway,
        &dir,
        "trapper",
        "trapper",
        "on-error = \"drop\"\n",
    )?;
    let (_, items) = list(TEST)?;
    ensure!(
        names(&items) == ["cm-0", "cm-2"],
        "the trapped object is dropped, the next served: {:?}",
        names(&items)
    );
    let (_, again) = list(TEST)?;
    ensure!(
        names(&again) == ["cm-0", "cm-2"],
        "a fresh instance serves the next list"
    );
    deactivate(&gateway, &dir, "trapper")?;

    activate(
        &gateway,
        &dir,
        "bloater",
        "bloater",
        "[limits]\nmax-output-kib = 64\n",
    )?;
    let (_, items) = list(TEST)?;
    ensure!(
        items.len() == 3 && items.iter().all(|i| i["data"]["index"].is_string()),
        "the oversized replace is refused, the originals kept"
    );
    deactivate(&gateway, &dir, "bloater")?;

    activate(
        &gateway,
        &dir,
        "tagger",
        "tagger",
        "[config]\ntag = \"good\"\n",
    )?;
    let load_error = || {
        chain(&gateway).map(|c| {
            c["filters"]
                .as_array()
                .and_then(|f| f.iter().find(|f| f["name"] == "tagger"))
                .map_or(serde_json::Value::Null, |f| f["lastLoadError"].clone())
        })
    };
    dir.write("tagger.toml", b"[config]\ntag = 7\n")?;
    wait_until(
        Duration::from_secs(10),
        "the config that breaks the schema to be refused",
        || load_error().is_ok_and(|e| e.as_str().is_some_and(|e| e.contains("/tag"))),
    )?;
    dir.write("tagger.toml", b"[config]\ntag = \"good\"\n")?;
    wait_until(Duration::from_secs(10), "the good config back", || {
        load_error().is_ok_and(|e| e.is_null())
    })?;
    let (in_child, in_gateway) =
        crate::support::by_place(gateway.hub, "edgegate_filter_config_checks_total")?;
    ensure!(
        in_child >= 2.0 && in_gateway == 0.0,
        "configs are checked in a child process: {in_child} there, {in_gateway} in the gateway"
    );
    let before = generation(&gateway)?;
    let whole = std::fs::read(dir.built.join("tagger.wasm"))?;
    dir.write("tagger.wasm", &whole[..whole.len() / 2])?;
    wait_until(
        Duration::from_secs(10),
        "the truncated file to be rejected",
        || chain(&gateway).is_ok_and(|c| !c["lastLoadError"].is_null()),
    )?;
    ensure!(
        generation(&gateway)? == before,
        "a rejected file makes no generation"
    );
    let (_, items) = list(TEST)?;
    ensure!(
        items
            .iter()
            .all(|i| i["metadata"]["annotations"]["edgegate.test/trail"] == "good"),
        "the previous generation keeps serving"
    );

    background.abort();
    let (served, failed) = (served.load(Ordering::SeqCst), failed.load(Ordering::SeqCst));
    println!("other clients meanwhile: {served} lists served, {failed} failed");
    ensure!(
        failed == 0 && served > 10,
        "other clients: {served} served, {failed} failed"
    );
    Ok(())
}

/// Hot reload under load: 100 swaps (add, change, remove) while 20 clients list and watch
/// through the gateway → no failed request, and each new generation goes live, its new
/// component compiled once in a child process (the compiler's memory leaves with it) and
/// mapped from the compiled-code store each time it is added again. The
/// rename → live latencies are printed; `benches/load/run` measures them against the 1 s goal.
pub fn hot_reload_under_load(env: &Env) -> Result<()> {
    let scratch = env.cluster.dir.join(crate::support::unique("reload"));
    let dir = FilterDir::new(&scratch)?;
    let gateway = env.gateway(&[&dir.flag()])?;
    wait_readyz(&gateway, 200, "the gateway to be ready")?;
    let ns = namespace(&env.cluster, "reload")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", 5))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());

    let lists = Arc::new(AtomicUsize::new(0));
    let watches = Arc::new(AtomicUsize::new(0));
    let relists = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let mut clients = Vec::new();
    for _ in 0..10 {
        let (client, url, lists, failures) =
            (client.clone(), url.clone(), lists.clone(), failures.clone());
        clients.push(rt.spawn(async move {
            loop {
                // JSON only: with no filter in the chain the list passes through as it came.
                match list_json_as(&client, &url, TEST).await {
                    Ok((_, items)) if items.len() == 5 => {
                        lists.fetch_add(1, Ordering::SeqCst);
                    }
                    other => failures
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(format!("list: {other:?}")),
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }));
    }
    for _ in 0..10 {
        let (client, url, watches, relists, failures) = (
            client.clone(),
            url.clone(),
            watches.clone(),
            relists.clone(),
            failures.clone(),
        );
        clients.push(rt.spawn(async move {
            loop {
                let mut watch = match Watch::open(&client, &format!("{url}?watch=true"), TEST).await
                {
                    Ok(watch) => watch,
                    Err(error) => {
                        failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(format!("watch open: {error:#}"));
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                watches.fetch_add(1, Ordering::SeqCst);
                // Read until the gateway ends the watch because the chain changed: it says
                // so with a 410, which makes a real client re-list.
                loop {
                    match watch.next(Duration::from_secs(60)).await {
                        Ok(Some(event))
                            if event["type"] == "ERROR" && event["object"]["code"] == 410 =>
                        {
                            relists.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(error) => {
                            failures
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(format!("watch: {error:#}"));
                            break;
                        }
                    }
                }
            }
        }));
    }

    let mut latencies = Vec::new();
    let mut live = 0u64;
    for swap in 0..100 {
        let name = format!("t{}", swap / 3);
        let before = generation(&gateway)?;
        let at = match swap % 3 {
            0 => dir.install(&name, "tagger", &format!("[config]\ntag = \"{name}-a\"\n"))?,
            1 => dir.write(
                &format!("{name}.toml"),
                format!("[config]\ntag = \"{name}-b\"\n").as_bytes(),
            )?,
            _ => dir.remove(&name)?,
        };
        let (now, took) = next_generation(&gateway, before, at)?;
        live = now;
        latencies.push(took);
    }
    std::thread::sleep(Duration::from_secs(2));
    for client in clients {
        client.abort();
    }
    latencies.sort();
    let (lists, watches, relists) = (
        lists.load(Ordering::SeqCst),
        watches.load(Ordering::SeqCst),
        relists.load(Ordering::SeqCst),
    );
    let failures = failures.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let (in_child, in_gateway) =
        crate::support::by_place(gateway.hub, "edgegate_filter_compiles_total")?;
    let stored = crate::support::metric(gateway.hub, "edgegate_filter_stored_loads_total")?;
    println!(
        "100 swaps up to generation {live}: rename → live p50 {:?}, p90 {:?}, max {:?}; {lists} lists, {watches} watch opens, {relists} told to re-list, {} failures; {in_child} compiles in a child process, {in_gateway} in the gateway's, {stored} loads from the store",
        latencies[50],
        latencies[90],
        latencies[99],
        failures.len()
    );
    ensure!(
        in_child == 1.0 && in_gateway == 0.0 && stored >= 33.0,
        "the tagger is compiled once, in a child process, and mapped from the store when added again: {in_child} compiles there, {in_gateway} in the gateway, {stored} loads from the store"
    );
    ensure!(
        failures.is_empty(),
        "failed requests: {:?}",
        &failures[..failures.len().min(5)]
    );
    ensure!(
        lists > 100 && watches > 10,
        "the clients were busy: {lists} lists, {watches} watches"
    );
    Ok(())
}

/// Watch: an object that stops passing a filter arrives as DELETED exactly once; one that
/// starts passing arrives as ADDED; resourceVersions are never changed.
pub fn watch_follows_the_visibility_rule(env: &Env) -> Result<()> {
    let scratch = env.cluster.dir.join(crate::support::unique("visibility"));
    let dir = FilterDir::new(&scratch)?;
    let gateway = env.gateway(&[&dir.flag()])?;
    wait_readyz(&gateway, 200, "the gateway to be ready")?;
    activate(
        &gateway,
        &dir,
        "tagger",
        "tagger",
        "[config]\ntag = \"hide\"\n",
    )?;
    let ns = namespace(&env.cluster, "visibility")?;
    let rt = runtime();
    let client = client();
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let (rv, _) = rt.block_on(list_as(&client, &url, TEST))?;
    let mut watch = rt.block_on(Watch::open(
        &client,
        &format!("{url}?watch=true&resourceVersion={rv}"),
        TEST,
    ))?;
    let kubectl = |args: &[&str]| env.cluster.kubectl(args);
    let direct_rv = || -> Result<String> {
        kubectl(&[
            "get",
            "configmap",
            "subject",
            "-n",
            &ns,
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
    };
    let next = |watch: &mut Watch| -> Result<(String, String)> {
        let event = rt
            .block_on(watch.next(Duration::from_secs(10)))?
            .context("the watch ended")?;
        Ok((
            event["type"].as_str().unwrap_or_default().to_owned(),
            event["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ))
    };

    kubectl(&["create", "configmap", "subject", "-n", &ns])?;
    ensure!(
        next(&mut watch)? == ("ADDED".into(), direct_rv()?),
        "created → ADDED at its version"
    );
    kubectl(&[
        "label",
        "configmap",
        "subject",
        "-n",
        &ns,
        "edgegate.test/drop=hide",
    ])?;
    ensure!(
        next(&mut watch)? == ("DELETED".into(), direct_rv()?),
        "hidden → DELETED at the event's version"
    );
    kubectl(&[
        "annotate",
        "configmap",
        "subject",
        "-n",
        &ns,
        "still=hidden",
    ])?;
    kubectl(&["label", "configmap", "subject", "-n", &ns, "more=changes"])?;
    kubectl(&[
        "label",
        "configmap",
        "subject",
        "-n",
        &ns,
        "edgegate.test/drop-",
    ])?;
    ensure!(
        next(&mut watch)? == ("ADDED".into(), direct_rv()?),
        "shown again → ADDED; nothing while hidden"
    );
    kubectl(&["annotate", "configmap", "subject", "-n", &ns, "seen=again"])?;
    ensure!(
        next(&mut watch)? == ("MODIFIED".into(), direct_rv()?),
        "still visible → MODIFIED"
    );
    Ok(())
}

/// A LIST of 10 000 objects through a 3-filter chain and the cache keeps the gateway's peak
/// RSS growth within 2 × the largest object + 8 MB, the first list after start (which also
/// fills pools of fixed size that later lists reuse: the filters' instance memories, the
/// store's page cache) and the next one.
pub fn a_large_list_streams_in_bounded_memory(env: &Env) -> Result<()> {
    let scratch = env.cluster.dir.join(crate::support::unique("memory"));
    let dir = FilterDir::new(&scratch)?;
    let mut gateway = Gateway::start(
        &env.bin,
        &env.cluster,
        &[&dir.flag(), "--cache-agents=test"],
    )?;
    for (name, component, toml) in [
        ("first", "tagger", "[config]\ntag = \"one\"\n"),
        ("second", "tagger", "[config]\ntag = \"two\"\n"),
        ("stamp", "nodestamp", "add-components = [\"test\"]\n"),
    ] {
        activate(&gateway, &dir, name, component, toml)?;
    }
    let ns = namespace(&env.cluster, "memory")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(
        &client,
        &gateway.url(),
        &ns,
        "big",
        10_000,
    ))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());

    let pid = gateway.process().context("the gateway runs")?.pid();
    let status = |field: &str| -> Result<u64> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let line = text
            .lines()
            .find(|l| l.starts_with(field))
            .with_context(|| format!("no {field}"))?;
        Ok(line
            .split_whitespace()
            .nth(1)
            .context("a value")?
            .parse::<u64>()?
            * 1024)
    };
    let mut growths = Vec::new();
    let mut bound = 0;
    for round in 1..=2 {
        // Resets the peak-RSS mark, so VmHWM afterwards is the peak of this list alone.
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5")?;
        let before = status("VmRSS:")?;
        let split_before = (status("RssAnon:")?, status("RssFile:")?);
        let (code, body) = rt.block_on(get_as(&client, &url, TEST))?;
        ensure!(code == 200, "the list answered {code}");
        let list: serde_json::Value = serde_json::from_slice(&body)?;
        let items = list["items"].as_array().context("items")?;
        ensure!(items.len() == 10_000, "{} items", items.len());
        let stamps = &items[9_999]["metadata"]["annotations"];
        ensure!(
            stamps["edgegate.test/trail"] == "one,two" && stamps["edgegate.io/node"].is_string(),
            "all three filters ran: {stamps}"
        );
        crate::support::wait_metric(
            gateway.hub,
            "edgegate_cache_commits_total",
            f64::from(round),
        )?;
        let peak = status("VmHWM:")?;
        let split_after = (status("RssAnon:")?, status("RssFile:")?);
        let largest = items
            .iter()
            .map(|i| i.to_string().len() as u64)
            .max()
            .unwrap_or(0);
        bound = 2 * largest + 8 * 1024 * 1024;
        let growth = peak.saturating_sub(before);
        println!(
            "list {round}: 10 000 objects ({:.1} MB) through 3 filters and the cache, committed: peak RSS {:.1} MB → {:.1} MB, growth {:.1} MB (bound {:.1} MB); after the commit: anonymous {:+.1} MB, file-backed {:+.1} MB",
            body.len() as f64 / 1e6,
            before as f64 / 1e6,
            peak as f64 / 1e6,
            growth as f64 / 1e6,
            bound as f64 / 1e6,
            (split_after.0 as f64 - split_before.0 as f64) / 1e6,
            (split_after.1 as f64 - split_before.1 as f64) / 1e6,
        );
        growths.push(growth);
    }
    for (round, growth) in growths.iter().enumerate() {
        ensure!(
            *growth <= bound,
            "peak RSS grew {growth} B on list {}, more than {bound} B",
            round + 1
        );
    }
    Ok(())
}

/// With `EDGEGATE_FILTER_PERF_MAP` set, compiling a filter and loading it from the
/// compiled-code store (what the gateway does with every filter) write a perf map naming
/// the filter's functions; without it, none is written.
pub fn a_perf_map_names_the_filters_code(env: &Env) -> Result<()> {
    let scratch = tempfile::tempdir()?;
    let cache = scratch.path().join("compiled");
    let tagger = edgegate_testkit::filters::built(&["tagger"])?.join("tagger.wasm");
    // The maps are written to /tmp by the child: removed on drop, also when a check fails.
    struct Map(PathBuf);
    impl Drop for Map {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let compile = |perf_map: &str| -> Result<Map> {
        let child = std::process::Command::new(&env.bin)
            .args(["filter", "compile", "--compiled-cache-dir"])
            .arg(&cache)
            .arg(&tagger)
            .env(edgegate::filter::PERF_MAP_ENV, perf_map)
            .stdout(std::process::Stdio::null())
            .spawn()?;
        let map = Map(PathBuf::from(format!("/tmp/perf-{}.map", child.id())));
        let _ = std::fs::remove_file(&map.0);
        let output = child.wait_with_output()?;
        ensure!(output.status.success(), "edgegate filter compile failed");
        Ok(map)
    };
    for (round, what) in ["compiled", "loaded from the cache"].iter().enumerate() {
        let map = compile("1")?;
        let text = std::fs::read_to_string(&map.0)
            .with_context(|| format!("no perf map when {what} (round {round})"))?;
        let functions = text
            .lines()
            .filter(|l| l.contains("wasm[0]::function"))
            .count();
        ensure!(
            functions > 10,
            "{functions} guest functions in the map when {what}"
        );
    }
    let map = compile("0")?;
    ensure!(
        !map.0.exists(),
        "a perf map was written though none was asked for"
    );
    Ok(())
}
