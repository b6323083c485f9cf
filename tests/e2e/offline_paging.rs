//! Paging across the cut: a client that paged online goes on offline with kube-apiserver's
//! own continue token, and gets the rest of the list with no duplicate and no gap, or the
//! apiserver's `410` when the cache cannot prove the rest unchanged since. Offline, versions
//! and streaming initial lists (`sendInitialEvents`) are answered as the apiserver answers.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::process::wait_until;

use crate::support::{
    Env, Plain, Watch, client, create_configmaps, get_as, namespace, relayed_gateway, runtime,
    wait_readyz,
};

const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";

/// One page: its items' names, version, continue token and remaining count.
struct Page {
    names: Vec<String>,
    version: String,
    token: String,
    remaining: Option<u64>,
}

async fn page(client: &Plain, url: &str) -> Result<Page> {
    let (status, body) = get_as(client, url, KUBELET).await?;
    ensure!(
        status == 200,
        "{url}: {status} {}",
        String::from_utf8_lossy(&body)
    );
    let list: serde_json::Value = serde_json::from_slice(&body)?;
    let names = list["items"]
        .as_array()
        .context("items")?
        .iter()
        .filter_map(|item| item["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let text = |field: &str| {
        list["metadata"][field]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    Ok(Page {
        names,
        version: text("resourceVersion"),
        token: text("continue"),
        remaining: list["metadata"]["remainingItemCount"].as_u64(),
    })
}

/// Ten ConfigMaps, listed and watched as kubelet through a gateway, so their set is cached
/// and kept synced. Two first pages are read online: of three (its rest from c-3 on) and of
/// one (its rest from c-1 on); then c-1 changes and the link is cut. Offline, the first
/// apiserver token gives the other seven over two pages, at its version, with no duplicate
/// and no gap. The second, whose rest changed, is refused `410` with a token at the newest,
/// as the apiserver refuses a compacted one, and the full list (what client-go's pager falls
/// back to) has every ConfigMap once. `Exact` and too-new versions get the apiserver's errors.
pub fn a_list_paged_online_goes_on_offline(env: &Env) -> Result<()> {
    let (relay, gateway) = relayed_gateway(env)?;
    let ns = namespace(&env.cluster, "paging")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "c", 10))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let all = rt.block_on(page(&client, &url))?;
    ensure!(all.names.len() == 10, "the full list: {:?}", all.names);
    let watch_url = format!(
        "{url}?watch=true&allowWatchBookmarks=true&resourceVersion={}",
        all.version
    );
    let _watch = rt.block_on(Watch::open(&client, &watch_url, KUBELET))?;

    let first = rt.block_on(page(&client, &format!("{url}?limit=3")))?;
    ensure!(
        first.names == ["c-0", "c-1", "c-2"] && !first.token.is_empty(),
        "the first page online: {:?}",
        first.names
    );
    let other = rt.block_on(page(&client, &format!("{url}?limit=1")))?;
    change(env, &ns, "c-1")?;
    let changed = version_of(env, &ns, "c-1")?;
    wait_until(
        Duration::from_secs(20),
        "the set synced past the change",
        || cached_version(&gateway, &ns).is_some_and(|v| v >= changed),
    )?;

    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;

    let second = rt.block_on(page(
        &client,
        &format!("{url}?limit=4&continue={}", first.token),
    ))?;
    let third = rt.block_on(page(
        &client,
        &format!("{url}?limit=4&continue={}", second.token),
    ))?;
    let paged: Vec<&String> = [&first, &second, &third]
        .iter()
        .flat_map(|p| &p.names)
        .collect();
    println!(
        "paged across the cut: {:?} | {:?} | {:?}",
        first.names, second.names, third.names
    );
    ensure!(
        paged == all.names.iter().collect::<Vec<_>>(),
        "every ConfigMap once, in order: {paged:?}"
    );
    ensure!(
        second.version == first.version && second.remaining == Some(3) && third.token.is_empty(),
        "the rest at the token's version {}: {} with {:?} remaining, then the end ({:?})",
        first.version,
        second.version,
        second.remaining,
        third.token
    );

    // The gateway's token is written as the apiserver writes its own.
    let decoded = |token: &str| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .map(|json| String::from_utf8_lossy(&json).into_owned())
    };
    let (apiservers, gateways) = (decoded(&first.token)?, decoded(&second.token)?);
    println!("the apiserver's token: {apiservers}; the gateway's: {gateways}");
    ensure!(
        apiservers.replace("c-2", "c-6") == gateways,
        "the tokens are alike: {apiservers} and {gateways}"
    );

    let retry = continue_refused(&rt, &client, &url, &other.token)?;
    ensure!(
        !retry.is_empty(),
        "a 410 that goes on carries a continue token"
    );
    let inconsistent = rt.block_on(page(&client, &format!("{url}?limit=4&continue={retry}")))?;
    ensure!(
        inconsistent.names == ["c-1", "c-2", "c-3", "c-4"],
        "the inconsistent rest goes on from the same key: {:?}",
        inconsistent.names
    );
    let full = rt.block_on(page(&client, &url))?;
    ensure!(
        full.names == all.names,
        "the full list offline, as the pager falls back to it: {:?}",
        full.names
    );

    let refusal = |query: String| -> Result<(u16, serde_json::Value)> {
        let (status, body) = rt.block_on(get_as(&client, &format!("{url}?{query}"), KUBELET))?;
        Ok((status.as_u16(), serde_json::from_slice(&body)?))
    };
    let (code, exact) = refusal(format!(
        "resourceVersion={}&resourceVersionMatch=Exact",
        first.version
    ))?;
    ensure!(
        code == 410 && exact["reason"] == "Expired",
        "Exact before the change: {code} {exact}"
    );
    let (code, ahead) = refusal(format!(
        "resourceVersion={}&resourceVersionMatch=NotOlderThan",
        changed + 1_000_000
    ))?;
    ensure!(
        code == 504 && ahead["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge",
        "a version the cache never held: {code} {ahead}"
    );
    let (code, both) = refusal(format!("continue={}&resourceVersion=5", first.token))?;
    ensure!(
        code == 400,
        "continue with a resourceVersion: {code} {both}"
    );
    Ok(())
}

fn continue_refused(
    rt: &tokio::runtime::Runtime,
    client: &Plain,
    url: &str,
    token: &str,
) -> Result<String> {
    let (status, body) = rt.block_on(get_as(
        client,
        &format!("{url}?limit=4&continue={token}"),
        KUBELET,
    ))?;
    let status_body: serde_json::Value = serde_json::from_slice(&body)?;
    ensure!(
        status == 410 && status_body["reason"] == "Expired",
        "a token whose rest changed: {status} {status_body}"
    );
    Ok(status_body["metadata"]["continue"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// Labels `name` anew in the cloud.
fn change(env: &Env, ns: &str, name: &str) -> Result<()> {
    let stamp = format!("changed={}", name.replace('-', ""));
    env.cluster
        .kubectl(&["label", "configmap", name, "-n", ns, &stamp, "--overwrite"])?;
    Ok(())
}

fn version_of(env: &Env, ns: &str, name: &str) -> Result<u64> {
    let out = env.cluster.kubectl(&[
        "get",
        "configmap",
        name,
        "-n",
        ns,
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ])?;
    Ok(out.trim().parse()?)
}

/// The version kubelet's set of the namespace's ConfigMaps is synced to.
fn cached_version(gateway: &edgegate_testkit::Gateway, ns: &str) -> Option<u64> {
    let listing = edgegate_testkit::http::get(gateway.hub, "/v1/cache").ok()?;
    let sets: Vec<serde_json::Value> = serde_json::from_str(&listing.body).ok()?;
    sets.iter()
        .find(|s| {
            s["component"] == "kubelet"
                && s["namespace"] == ns
                && s["resource"] == "configmaps.v1.core"
        })
        .and_then(|s| s["resource_version"].as_str()?.parse().ok())
}
