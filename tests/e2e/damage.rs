//! A damaged cache never takes the node down.

use std::io::{Seek, SeekFrom, Write};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::http;

use crate::support::{
    Env, client, create_configmaps, list_as, metric, namespace, runtime, wait_metric,
};

const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";

/// As a new user found it: 16 KiB of random bytes written into the middle of a stopped
/// gateway's cache file, then the gateway started again. It starts, moves the damaged file
/// aside, forwards `kubectl get`, counts the reset, and `/v1/readyz` stays `200` and says
/// what happened.
pub fn a_damaged_cache_is_moved_aside_and_the_gateway_forwards(env: &Env) -> Result<()> {
    let mut gateway = env.gateway(&[])?;
    let ns = namespace(&env.cluster, "damage")?;
    let rt = runtime();
    let client = client();
    // Enough objects that the file is several MiB and its middle holds them.
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", 3000))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let (_, listed) = rt.block_on(list_as(&client, &url, KUBELET))?;
    ensure!(listed.len() == 3000, "listed {}", listed.len());
    crate::support::wait_sets(gateway.hub, "kubelet", 1)?;
    gateway.stop(Duration::from_secs(5));

    let cache = gateway.dir.join("cache");
    scribble_in_the_middle(&cache.join("edgegate.redb"))?;
    gateway.restart()?;

    let out = gateway.kubectl(&["get", "configmap", "cm-7", "-n", &ns, "-o", "name"])?;
    ensure!(
        out.trim() == "configmap/cm-7",
        "kubectl get through the gateway: {out}"
    );
    // A read of the whole set reaches any damage open did not.
    let (_, again) = rt.block_on(list_as(&client, &url, KUBELET))?;
    ensure!(
        again.len() == 3000,
        "listed {} after the restart",
        again.len()
    );
    let readyz = http::get(gateway.hub, "/v1/readyz")?;
    ensure!(
        readyz.status == 200
            && readyz.body.contains("cache damaged")
            && readyz.body.contains("moved aside to"),
        "readyz: {readyz:?}\n{}",
        gateway.log_tail(20)
    );
    ensure!(
        metric(gateway.hub, "edgegate_cache_store_resets_total")? == 1.0,
        "one reset is counted"
    );
    let aside = std::fs::read_dir(&cache)?
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("edgegate.redb.damaged-")
        })
        .count();
    ensure!(
        aside == 1,
        "the damaged file is kept for diagnosis ({aside} found)"
    );
    // The fresh store caches again.
    wait_metric(gateway.hub, "edgegate_cache_commits_total", 1.0)?;
    ensure!(gateway.process().is_some(), "the gateway still runs");
    Ok(())
}

/// Writes 16 KiB of (seeded) random bytes into the middle of `file`.
fn scribble_in_the_middle(file: &std::path::Path) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .with_context(|| format!("opening {}", file.display()))?;
    let middle = file.metadata()?.len() / 2;
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let noise: Vec<u8> = (0..16 << 10)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    file.seek(SeekFrom::Start(middle))?;
    file.write_all(&noise)?;
    file.sync_all()?;
    Ok(())
}
