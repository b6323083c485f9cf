//! What crosses the edge link: a list the gateway frames is asked for gzipped, crosses the
//! link in a fraction of its bytes, and reaches the client and the cache inflated.

use std::time::Duration;

use anyhow::{Result, ensure};
use edgegate_testkit::http;
use edgegate_testkit::process::wait_until;

use crate::support::{
    Env, client, create_configmaps, get_as, namespace, relayed_gateway, runtime, versions,
    wait_readyz,
};

const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";

/// Items of the list: enough that kube-apiserver gzips it (it does above 128 KiB).
const CONFIGMAPS: usize = 800;

pub fn a_framed_list_crosses_the_edge_link_gzipped(env: &Env) -> Result<()> {
    let (relay, gateway) = relayed_gateway(env)?;
    let ns = namespace(&env.cluster, "gzip")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(
        &client,
        &gateway.url(),
        &ns,
        "big",
        CONFIGMAPS,
    ))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());

    let before = relay.bytes_down();
    let (status, body) = rt.block_on(get_as(&client, &url, KUBELET))?;
    let carried = relay.bytes_down() - before;
    ensure!(status == 200, "list answered {status}");
    let online: serde_json::Value = serde_json::from_slice(&body)?;
    let online = online["items"].as_array().cloned().unwrap_or_default();
    ensure!(
        online.len() == CONFIGMAPS,
        "{} of {CONFIGMAPS} items",
        online.len()
    );
    let direct = env
        .cluster
        .kubectl(&["get", "configmaps", "-n", &ns, "-o", "json"])?;
    let direct: serde_json::Value = serde_json::from_str(&direct)?;
    let direct = direct["items"].as_array().cloned().unwrap_or_default();
    ensure!(
        versions(&online) == versions(&direct),
        "the list through the gateway differs from the apiserver's"
    );
    // Uncompressed, the link would carry more than the body itself (TLS framing on top);
    // gzipped, these near-identical ConfigMaps shrink by far more than half.
    ensure!(
        carried * 3 < body.len() as u64,
        "the link carried {carried} bytes for a list of {} bytes",
        body.len()
    );
    eprintln!(
        "a list of {} bytes crossed the edge link in {carried} bytes",
        body.len()
    );

    // What the cache kept is the inflated list: it is served whole when the link is cut.
    wait_until(Duration::from_secs(20), "kubelet's list committed", || {
        http::get(gateway.hub, "/v1/cache")
            .is_ok_and(|r| r.body.contains(&format!("\"namespace\":\"{ns}\"")))
    })?;
    relay.cut();
    wait_readyz(&gateway, 503, "the gateway sees the cut")?;
    let (status, body) = rt.block_on(get_as(&client, &url, KUBELET))?;
    ensure!(status == 200, "offline list answered {status}");
    let offline: serde_json::Value = serde_json::from_slice(&body)?;
    let offline = offline["items"].as_array().cloned().unwrap_or_default();
    ensure!(
        versions(&offline) == versions(&direct),
        "the cached list differs from the apiserver's"
    );
    Ok(())
}
