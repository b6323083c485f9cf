//! The hub keeps what the node cached to the node: bound to every address, it answers its
//! probes to anyone and its cache to loopback only, and never shows a cached Secret's values.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::http;
use edgegate_testkit::netns::Link;
use edgegate_testkit::process::wait_until;

use crate::support::{Env, client, get_as, namespace, runtime};

const KUBELET: &str = "kubelet/v1.31.0 (linux/amd64) kubernetes/9bfc1c2";

/// A caller on another host (a node network namespace) reaches the probes but not the
/// cache; a caller on loopback reads a cached Secret with its values redacted.
pub fn the_hub_keeps_its_cache_to_loopback(env: &Env) -> Result<()> {
    let gateway = env.gateway(&["--bind-address=0.0.0.0"])?;
    let ns = namespace(&env.cluster, "locked")?;
    env.cluster.kubectl(&[
        "create",
        "secret",
        "generic",
        "registry",
        "-n",
        &ns,
        "--from-literal=password=hunter2",
    ])?;
    let rt = runtime();
    let (status, _) = rt.block_on(get_as(
        &client(),
        &format!("{}/api/v1/namespaces/{ns}/secrets/registry", gateway.url()),
        KUBELET,
    ))?;
    ensure!(status == 200, "kubelet's get of its Secret: {status}");
    let object =
        format!("/v1/cache/object?component=kubelet&resource=secrets.v1.core&name={ns}/registry");
    // The gateway writes what it tees after the answer: wait until the Secret is cached.
    wait_until(Duration::from_secs(20), "the Secret cached", || {
        http::get(gateway.hub, &object).is_ok_and(|r| r.status == 200)
    })?;
    let shown = http::get(gateway.hub, &object)?;
    let shown: serde_json::Value = serde_json::from_str(&shown.body)
        .with_context(|| format!("the hub's answer: {}", shown.body))?;
    ensure!(
        shown["data"]["password"] == "<redacted>" && shown["metadata"]["name"] == "registry",
        "{shown}"
    );
    // "hunter2" base64-encoded, and as it is.
    let text = shown.to_string();
    ensure!(
        !text.contains("aHVudGVyMg") && !text.contains("hunter2"),
        "{text}"
    );

    let link = Link::create()?;
    let port = gateway.hub.port();
    let status_from_node = |path: &str| -> Result<String> {
        let url = format!("http://{}:{port}{path}", link.host_ip());
        link.run(
            "curl",
            &[
                "-s",
                "-m",
                "10",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                &url,
            ],
        )
    };
    for path in ["/v1/healthz", "/v1/readyz", "/metrics"] {
        let status = status_from_node(path)?;
        ensure!(status.trim() == "200", "{path} from the node: {status}");
    }
    for path in [&object, "/v1/cache", "/v1/filters", "/v1/token"] {
        let status = status_from_node(path)?;
        ensure!(status.trim() == "403", "{path} from the node: {status}");
    }
    Ok(())
}
