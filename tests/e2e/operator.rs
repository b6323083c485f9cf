//! What an operator sees and relies on: `edgegate cache ls|get`, and the node-lease heartbeat.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::process::wait_until;

use crate::support::{Env, client, create_configmaps, list_as, namespace, runtime, wait_metric};

const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";

fn edgegate(env: &Env, args: &[&str]) -> Result<String> {
    let output = Command::new(&env.bin).args(args).output()?;
    ensure!(
        output.status.success(),
        "edgegate {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?)
}

/// `edgegate cache ls` and `cache get` show what the cache holds: through the running
/// gateway's hub, and from the file once the gateway has stopped.
pub fn cache_tools_show_the_cache(env: &Env) -> Result<()> {
    let mut gateway = env.gateway(&[])?;
    let ns = namespace(&env.cluster, "tools")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "tool", 3))?;
    let (rv, _) = rt.block_on(list_as(
        &client,
        &format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url()),
        KUBELET,
    ))?;
    wait_metric(gateway.hub, "edgegate_cache_commits_total", 1.0)?;

    let port = gateway.hub.port().to_string();
    let cache_dir = gateway.dir.join("cache").display().to_string();
    let check = |listing: &str| -> Result<()> {
        let row = listing
            .lines()
            .find(|l| l.starts_with("kubelet") && l.contains(&ns))
            .with_context(|| format!("no kubelet row for {ns}:\n{listing}"))?;
        let cells: Vec<&str> = row.split_whitespace().collect();
        ensure!(
            cells[1] == "configmaps.v1.core" && cells[4] == "3" && cells[5] == rv,
            "row {row:?} (rv {rv})"
        );
        Ok(())
    };
    check(&edgegate(env, &["cache", "ls", "--serve-port", &port])?)?;
    let object = edgegate(
        env,
        &[
            "cache",
            "get",
            "kubelet",
            "configmaps",
            &format!("{ns}/tool-1"),
            "--serve-port",
            &port,
        ],
    )?;
    let object: serde_json::Value = serde_json::from_str(&object)?;
    ensure!(object["data"]["index"] == "1", "{object}");

    gateway.stop(Duration::from_secs(5));
    // No gateway answers now: the tools read the file.
    check(&edgegate(
        env,
        &[
            "cache",
            "ls",
            "--serve-port",
            &port,
            "--disk-cache-path",
            &cache_dir,
        ],
    )?)?;
    let missing = Command::new(&env.bin)
        .args([
            "cache",
            "get",
            "kubelet",
            "configmaps",
            &format!("{ns}/nope"),
            "--serve-port",
            &port,
            "--disk-cache-path",
            &cache_dir,
        ])
        .output()?;
    ensure!(
        !missing.status.success() && String::from_utf8_lossy(&missing.stderr).contains("no cached")
    );
    Ok(())
}

/// With `--node-name`, the health probe renews the node's Lease in kube-node-lease.
pub fn node_lease_is_the_heartbeat(env: &Env) -> Result<()> {
    let node = crate::support::unique("edge-heartbeat");
    let _gateway = env.gateway(&[
        &format!("--node-name={node}"),
        "--heartbeat-interval-seconds=1",
    ])?;
    let renew_time = || -> Option<String> {
        let lease = env
            .cluster
            .kubectl(&["get", "lease", &node, "-n", "kube-node-lease", "-o", "json"])
            .ok()?;
        let lease: serde_json::Value = serde_json::from_str(&lease).ok()?;
        (lease["spec"]["holderIdentity"] == node.as_str())
            .then(|| lease["spec"]["renewTime"].as_str().map(str::to_owned))?
    };
    let mut first = None;
    wait_until(Duration::from_secs(15), "the node's lease", || {
        first = renew_time();
        first.is_some()
    })?;
    wait_until(Duration::from_secs(15), "the lease to be renewed", || {
        renew_time().is_some_and(|t| Some(t) > first)
    })?;
    Ok(())
}
