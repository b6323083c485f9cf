//! The cache file damaged while the gateway runs: truncated, pages or its header overwritten.
//! Forwarding goes on, nothing is served offline from the damaged file, and a fresh store
//! caches again.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::http;

use crate::disk_faults::log_lines;
use crate::support::{
    Env, Plain, Watch, client, create_configmaps, get_as, list_as, metric, metric_sample,
    namespace, relayed_gateway, runtime, versions, wait_readyz, wait_sets,
};

const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";
const DAMAGE_LOG: &str = "the cache was damaged";
/// Enough ConfigMaps that their set outgrows redb's 1 MiB page cache: an offline list
/// reads some of its pages from the file.
const COUNT: usize = 3000;

/// The cache file cut to nothing under the running gateway.
pub fn a_cache_file_truncated_while_serving_is_replaced(env: &Env) -> Result<()> {
    damaged_while_serving(env, "trunc", true, |file| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(file)?
            .set_len(0)?;
        Ok(())
    })
}

/// Every object's filler in the cache file changed under the running gateway (20 bytes of
/// each run of 200 `x`): the objects stay well-formed JSON, and redb reads them back
/// without an error.
pub fn a_cache_file_whose_pages_change_while_serving_is_replaced(env: &Env) -> Result<()> {
    damaged_while_serving(env, "pages", true, |file| {
        let bytes = std::fs::read(file)?;
        let mut out = std::fs::OpenOptions::new().write(true).open(file)?;
        let mut at = 0;
        while let Some(run) = bytes[at..]
            .windows(200)
            .position(|w| w.iter().all(|b| *b == b'x'))
        {
            out.seek(SeekFrom::Start((at + run + 50) as u64))?;
            out.write_all(&[b'y'; 20])?;
            at += run + 200;
        }
        out.sync_all()?;
        Ok(())
    })
}

/// The cache file's first 4 KiB (redb's header) overwritten under the running gateway:
/// redb keeps the header in memory and writes it whole at every commit, so the next
/// commit repairs it and nothing is lost.
pub fn a_cache_file_header_overwritten_while_serving_is_rewritten(env: &Env) -> Result<()> {
    damaged_while_serving(env, "header", false, |file| {
        let mut out = std::fs::OpenOptions::new().write(true).open(file)?;
        out.write_all(&[0xa5; 4096])?;
        out.sync_all()?;
        Ok(())
    })
}

/// A set of [`COUNT`] ConfigMaps cached, then the cache file damaged by `damage`; lists and
/// a watch keep being forwarded whole, then the cloud is cut and the set asked offline:
/// the answer is the set as listed, whole, or a `5xx` Status, or a body broken off (never
/// a list a client takes for whole); the store is replaced when `replaced` (logged once,
/// counted, told by `/v1/readyz`), and in the end caches again and answers offline whole.
fn damaged_while_serving(
    env: &Env,
    tag: &str,
    replaced: bool,
    damage: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let (relay, mut gateway) = relayed_gateway(env)?;
    let rt = runtime();
    let client = client();
    let ns = namespace(&env.cluster, &format!("damage-{tag}"))?;
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "cm", COUNT))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let (_, listed) = rt.block_on(list_as(&client, &url, KUBELET))?;
    ensure!(listed.len() == COUNT, "listed {}", listed.len());
    wait_sets(gateway.hub, "kubelet", 1)?;

    let file = gateway.dir.join("cache/edgegate.redb");
    damage(&file).with_context(|| format!("damaging {}", file.display()))?;

    let (version, _) = rt.block_on(list_as(&client, &url, KUBELET))?;
    let watch_url = format!("{url}?watch=true&resourceVersion={version}");
    let mut watch = rt.block_on(Watch::open(&client, &watch_url, KUBELET))?;
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "w", 1))?;
    rt.block_on(watch.wait_for("ADDED", "w-0", std::time::Duration::from_secs(30)))?;
    let mut online = Vec::new();
    for _ in 0..5 {
        let (_, items) = rt.block_on(list_as(&client, &url, KUBELET))?;
        ensure!(
            items.len() == COUNT + 1,
            "listed {} online after the damage",
            items.len()
        );
        online = items;
    }
    drop(watch);
    let commits = metric(gateway.hub, "edgegate_cache_commits_total")?;
    let found_online = metric(gateway.hub, "edgegate_cache_store_resets_total")?;
    if found_online > 0.0 {
        let readyz = http::get(gateway.hub, "/v1/readyz")?;
        ensure!(
            readyz.status == 200 && readyz.body.contains("cache damaged"),
            "readyz: {readyz:?}"
        );
    }

    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;
    let whole = offline_answer(&rt, &client, &url, &online)?;
    let resets = metric(gateway.hub, "edgegate_cache_store_resets_total")?;
    eprintln!(
        "{tag}: offline answer {}; {resets} reset(s), {found_online} of them before the cut; {commits} commit(s) before the cut",
        if whole { "whole" } else { "refused" }
    );
    ensure!(
        gateway.process().is_some(),
        "the gateway runs:\n{}",
        gateway.log_tail(40)
    );
    for kind in ["full", "read_only", "io"] {
        let series = format!(r#"edgegate_cache_disk_faults_total{{kind="{kind}"}}"#);
        ensure!(
            metric_sample(gateway.hub, &series).unwrap_or(0.0) == 0.0,
            "damage is no disk fault ({kind})"
        );
    }
    let logged = log_lines(&gateway, DAMAGE_LOG);
    if !replaced {
        ensure!(whole, "an undamaged set is served offline");
        ensure!(resets == 0.0 && logged == 0, "nothing to replace");
        // The commits since rewrote the header.
        let head = std::fs::read(&file)?;
        ensure!(head.starts_with(b"redb"), "the header is rewritten");
        return Ok(());
    }
    ensure!(
        resets == 1.0 && logged == 1,
        "the damage found, counted and logged once ({resets} reset(s), {logged} line(s)):\n{}",
        gateway.log_tail(40)
    );

    relay.restore();
    wait_readyz(&gateway, 200, "the gateway to reconnect")?;
    let readyz = http::get(gateway.hub, "/v1/readyz")?;
    ensure!(
        readyz.body.contains("cache damaged") && readyz.body.contains("moved aside to"),
        "readyz: {readyz:?}"
    );
    // The fresh store caches the set again, and answers for it offline.
    let (_, items) = rt.block_on(list_as(&client, &url, KUBELET))?;
    ensure!(items.len() == COUNT + 1, "listed {}", items.len());
    wait_sets(gateway.hub, "kubelet", 1)?;
    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the second cut")?;
    ensure!(
        offline_answer(&rt, &client, &url, &items)?,
        "the fresh store answers offline"
    );
    ensure!(log_lines(&gateway, DAMAGE_LOG) == 1, "logged once in all");
    Ok(())
}

/// Lists `url` offline: `true` when the answer is `online`'s set whole (same objects at the
/// same versions, the same bytes), `false` when it is a `5xx` Status or broken off; fails
/// on anything else.
fn offline_answer(
    rt: &tokio::runtime::Runtime,
    client: &Plain,
    url: &str,
    online: &[serde_json::Value],
) -> Result<bool> {
    let Ok((status, body)) = rt.block_on(get_as(client, url, KUBELET)) else {
        return Ok(false);
    };
    if status.is_server_error() {
        let status: serde_json::Value = serde_json::from_slice(&body)
            .with_context(|| format!("a {status} that is no Status"))?;
        ensure!(status["kind"] == "Status", "{status}");
        return Ok(false);
    }
    ensure!(status == 200, "offline: {status}");
    let Ok(list) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return Ok(false);
    };
    let items = list["items"].as_array().context("items")?;
    ensure!(
        versions(items) == versions(online),
        "offline, {} items, not the set as listed",
        items.len()
    );
    ensure!(
        items == online,
        "offline, objects changed from what was listed"
    );
    Ok(true)
}
