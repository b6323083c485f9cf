//! A large list streams through a chain in bounded memory; the perf map of filter code;
//! instances made on demand where the pool's address space cannot be reserved.

use super::*;

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

/// The instance pool reserves terabytes of address space when the engine is built, so under
/// a limit of 32 GiB (`ulimit -v`, as valgrind's own) no filter can be compiled or run; with
/// `EDGEGATE_FILTER_ON_DEMAND` set, instances are made as needed and the same compile works.
/// The pool's failure names that switch.
pub fn instances_made_on_demand_fit_a_small_address_space(env: &Env) -> Result<()> {
    let scratch = tempfile::tempdir()?;
    let cache = scratch.path().join("compiled");
    let tagger = edgegate_testkit::filters::built(&["tagger"])?.join("tagger.wasm");
    let compile = |on_demand: Option<&str>| -> Result<std::process::Output> {
        let mut command = std::process::Command::new("sh");
        command
            .args(["-c", "ulimit -v 33554432 && exec \"$0\" \"$@\""])
            .arg(&env.bin)
            .args(["filter", "compile", "--compiled-cache-dir"])
            .arg(&cache)
            .arg(&tagger)
            .env_remove(edgegate::filter::ON_DEMAND_ENV);
        if let Some(value) = on_demand {
            command.env(edgegate::filter::ON_DEMAND_ENV, value);
        }
        Ok(command.output()?)
    };
    for pooled in [None, Some("0")] {
        let output = compile(pooled)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        ensure!(
            !output.status.success() && stderr.contains("pool"),
            "the pooled engine was built in 32 GiB of address space ({pooled:?}): {stderr}"
        );
        ensure!(
            stderr.contains(&format!("{}=1", edgegate::filter::ON_DEMAND_ENV)),
            "the pool's failure does not name the switch that does without it: {stderr}"
        );
    }
    let output = compile(Some("1"))?;
    ensure!(
        output.status.success(),
        "on demand, the compile failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(
        std::fs::read_dir(&cache)?.next().is_some(),
        "on demand, nothing was compiled into the store"
    );
    Ok(())
}
