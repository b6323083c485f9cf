//! What an operator sees and relies on: `edgegate cache ls|get`, and the node-lease heartbeat.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use crate::support::{Env, client, create_configmaps, list_as, namespace, request, runtime};

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
    crate::support::wait_sets(gateway.hub, "kubelet", 1)?;

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

/// kubelet's writes of its node lease are answered by the gateway (echoed, so no renewal
/// can conflict), and the gateway's heartbeat is the node's lease in the cloud: it creates
/// it (owned by the Node) and renews it while kubelet renews here, and only then.
pub fn node_lease_is_the_heartbeat(env: &Env) -> Result<()> {
    let node = crate::support::unique("edge-heartbeat");
    crate::support::apply(
        &env.cluster,
        &env.cluster.dir,
        &format!("{node}.json"),
        &format!(r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{node}"}}}}"#),
    )?;
    let gateway = env.gateway(&[
        &format!("--node-name={node}"),
        "--heartbeat-interval-seconds=1",
    ])?;
    let lease = || -> Option<serde_json::Value> {
        let lease = env
            .cluster
            .kubectl(&["get", "lease", &node, "-n", "kube-node-lease", "-o", "json"])
            .ok()?;
        serde_json::from_str(&lease).ok()
    };
    // The hub answers once the first probe of every server is in: had that probe renewed
    // the lease without a kubelet renewing it, the lease would exist by now.
    ensure!(
        lease().is_none(),
        "the gateway wrote the node's lease before kubelet renewed it"
    );

    let rt = runtime();
    let client = client();
    let leases = format!(
        "{}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
        gateway.url()
    );
    // kubelet's own lease, with a resourceVersion the cloud never had: answered as sent.
    let kubelet_lease = format!(
        r#"{{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{{"name":"{node}","namespace":"kube-node-lease","resourceVersion":"1"}},"spec":{{"holderIdentity":"{node}","leaseDurationSeconds":40}}}}"#
    );
    let renew = |method: http::Method, url: &str| -> Result<(http::StatusCode, String)> {
        rt.block_on(async {
            let request = request(method, url, None, KUBELET, Some(&kubelet_lease))?;
            let response = client.request(request).await?;
            let status = response.status();
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await?
                .to_bytes();
            Ok((status, String::from_utf8_lossy(&body).into_owned()))
        })
    };
    let (status, body) = renew(http::Method::POST, &leases)?;
    ensure!(status == 201, "kubelet's create: {status} {body}");
    let renew_time = || lease().and_then(|l| l["spec"]["renewTime"].as_str().map(str::to_owned));
    let mut first = None;
    // Up to a minute: a hang guard for a loaded machine, not a measure of the heartbeat.
    for round in 0..120 {
        let (status, body) = renew(http::Method::PUT, &format!("{leases}/{node}"))?;
        ensure!(
            status == 200 && body == kubelet_lease,
            "kubelet's renewal {round}: {status} {body}"
        );
        match (&first, renew_time()) {
            (None, Some(time)) => first = Some(time),
            (Some(first), Some(time)) if time > *first => break,
            _ => {}
        }
        ensure!(round < 119, "the gateway never renewed the node's lease");
        std::thread::sleep(Duration::from_millis(500));
    }
    let lease = lease().context("the node's lease")?;
    ensure!(
        lease["spec"]["holderIdentity"] == node.as_str(),
        "holder: {}",
        lease["spec"]["holderIdentity"]
    );
    ensure!(
        lease["metadata"]["ownerReferences"][0]["name"] == node.as_str()
            && lease["metadata"]["ownerReferences"][0]["kind"] == "Node",
        "the lease is not owned by its Node: {}",
        lease["metadata"]
    );
    Ok(())
}
