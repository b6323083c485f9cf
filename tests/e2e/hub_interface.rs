//! The hub interface: in a network namespace of its own (a node's), the gateway makes the
//! dummy link `yurthub-dummy0` with `169.254.2.1`, makes it again when it is deleted, and
//! serves its HTTPS proxy there for pods, each on its own service-account token: the
//! gateway's identity is lent to nobody there, online or offline.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::cluster::ClusterOptions;
use edgegate_testkit::netns::Link;
use edgegate_testkit::process::{Process, free_port, wait_until};
use edgegate_testkit::{Cluster, NOBODY_TOKEN, User};

use crate::support::{Env, unique};

const HUB_IP: &str = "169.254.2.1";
const NODE: &str = "edge-1";

/// kubectl in the node's namespace with `kubeconfig`: stdout, or stderr as the error.
fn kubectl_in(env: &Env, link: &Link, kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let kubeconfig = format!("--kubeconfig={}", kubeconfig.display());
    let mut all = vec![kubeconfig.as_str(), "--request-timeout=10s"];
    all.extend(args);
    link.run(&env.tools.kubectl.display().to_string(), &all)
}

/// The hub server's answer to `path`, asked from inside the namespace.
fn hub_get(env: &Env, link: &Link, hub: u16, path: &str) -> Result<String> {
    let server = format!("--server=http://127.0.0.1:{hub}");
    link.run(
        &env.tools.kubectl.display().to_string(),
        &[&server, "--request-timeout=5s", "get", "--raw", path],
    )
}

/// A GET without any credentials from inside the namespace (busybox's wget: kubectl would
/// ask for a user name instead of sending it); its body, or the error it reports.
fn anonymous_get(link: &Link, url: &str) -> Result<String> {
    link.run(
        "busybox",
        &["wget", "-q", "-O", "-", "--no-check-certificate", url],
    )
}

fn has_hub_address(link: &Link) -> bool {
    link.run("ip", &["-o", "addr", "show", "dev", "yurthub-dummy0"])
        .is_ok_and(|out| out.contains(&format!("inet {HUB_IP}/32")))
}

/// A service account of a namespace of its own that may read ConfigMaps there (and no
/// Secrets), one ConfigMap and one Secret, and a token of that account.
fn reader(cluster: &Cluster, dir: &Path) -> Result<(String, String)> {
    let ns = unique("hubif");
    let account = format!("--serviceaccount={ns}:reader");
    cluster.kubectl(&["create", "namespace", &ns])?;
    cluster.kubectl(&["create", "serviceaccount", "reader", "-n", &ns])?;
    cluster.kubectl(&[
        "create",
        "role",
        "cm-reader",
        "--verb=get,list,watch",
        "--resource=configmaps",
        "-n",
        &ns,
    ])?;
    cluster.kubectl(&[
        "create",
        "rolebinding",
        "cm-reader",
        "--role=cm-reader",
        &account,
        "-n",
        &ns,
    ])?;
    cluster.kubectl(&[
        "create",
        "configmap",
        "cm-1",
        "--from-literal=a=1",
        "-n",
        &ns,
    ])?;
    cluster.kubectl(&[
        "create",
        "secret",
        "generic",
        "s-1",
        "--from-literal=k=v",
        "-n",
        &ns,
    ])?;
    let request = dir.join("token-request.json");
    std::fs::write(
        &request,
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}"#,
    )?;
    let path = format!("/api/v1/namespaces/{ns}/serviceaccounts/reader/token");
    let answer = cluster.kubectl(&[
        "create",
        "--raw",
        &path,
        "-f",
        &request.display().to_string(),
    ])?;
    let answer: serde_json::Value = serde_json::from_str(&answer)?;
    let token = answer["status"]["token"]
        .as_str()
        .context("a token in the TokenRequest's answer")?
        .to_owned();
    Ok((ns, token))
}

/// A pod's client reaches the apiserver at `https://169.254.2.1:<port>` on its own token
/// and is served what its RBAC allows; a client without credentials gets `401`, a client
/// certificate other than the node's `403`, never the gateway's identity (which may read
/// everything); the link deleted is made again and serves again; offline the pod's list is
/// answered from its cache, while a token the apiserver never accepted gets nothing.
pub fn pods_reach_the_api_at_the_hub_address_on_their_own_tokens(env: &Env) -> Result<()> {
    let mut link = Link::create()?;
    let cluster = Cluster::start_with(
        &env.tools,
        env.etcd.clone(),
        ClusterOptions {
            address: link.host_ip().into(),
            node: Some(NODE.to_owned()),
            ..ClusterOptions::default()
        },
    )?;
    let dir = cluster.dir.join("hub-interface");
    std::fs::create_dir_all(&dir)?;
    let (ns, token) = reader(&cluster, &dir)?;
    let pki = &cluster.pki;
    let (secure, hub) = (free_port()?, free_port()?);
    let bin = env.bin.display().to_string();
    let args: Vec<String> = [
        format!("--net={}", link.path().display()),
        "--".to_owned(),
        bin,
        format!("--server-addr={}", cluster.url()),
        format!("--kubeconfig={}", cluster.gateway_kubeconfig.display()),
        format!("--node-name={NODE}"),
        format!("--proxy-secure-port={secure}"),
        format!("--serve-port={hub}"),
        format!("--tls-cert-file={}", pki.gateway_serving_cert.display()),
        format!(
            "--tls-private-key-file={}",
            pki.gateway_serving_key.display()
        ),
        format!("--disk-cache-path={}", dir.join("cache").display()),
        "--cache-agents=kubectl".to_owned(),
        "--heartbeat-interval-seconds=1".to_owned(),
        "--log-level=info,edgegate=debug".to_owned(),
    ]
    .to_vec();
    let mut gateway = Process::spawn(
        "edgegate",
        Path::new("nsenter"),
        &args,
        &dir.join("edgegate.log"),
    )?;
    let up = wait_until(Duration::from_secs(30), "edgegate /v1/healthz", || {
        hub_get(env, &link, hub, "/v1/healthz").is_ok()
    });
    if let Err(error) = up {
        gateway.check_running()?;
        return Err(error.context(gateway.log_tail(30)));
    }
    let result = scenario(env, &mut link, &cluster, &dir, &ns, &token, secure, hub);
    let log = gateway.log_tail(40);
    gateway.kill();
    result.with_context(|| log)
}

#[allow(clippy::too_many_arguments)]
fn scenario(
    env: &Env,
    link: &mut Link,
    cluster: &Cluster,
    dir: &Path,
    ns: &str,
    token: &str,
    secure: u16,
    hub: u16,
) -> Result<()> {
    ensure!(has_hub_address(link), "no {HUB_IP}/32 on yurthub-dummy0");
    let url = format!("https://{HUB_IP}:{secure}");
    let kubeconfig = |name: &str, user: &User<'_>| -> Result<PathBuf> {
        let path = dir.join(name);
        cluster.kubeconfig_for(&path, &url, user)?;
        Ok(path)
    };
    let pod = kubeconfig("pod.kubeconfig", &User::Token(token))?;
    let nobody = kubeconfig("nobody.kubeconfig", &User::Token(NOBODY_TOKEN))?;
    let pki = &cluster.pki;
    let (node_cert, node_key) = pki.node.as_ref().context("the node's certificate")?;
    let node = kubeconfig("node.kubeconfig", &User::Certificate(node_cert, node_key))?;
    let stranger = kubeconfig(
        "stranger.kubeconfig",
        &User::Certificate(&pki.rotated_cert, &pki.rotated_key),
    )?;
    let configmaps = format!("/api/v1/namespaces/{ns}/configmaps");
    let secrets = format!("/api/v1/namespaces/{ns}/secrets");
    let list = |link: &Link, kubeconfig: &Path, path: &str| {
        kubectl_in(env, link, kubeconfig, &["get", "--raw", path])
    };

    let listed = list(link, &pod, &configmaps)?;
    ensure!(listed.contains("\"cm-1\""), "the pod's list: {listed}");
    let refused = list(link, &pod, &secrets);
    ensure!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("Forbidden")),
        "the pod reads secrets only if its RBAC allows: {refused:?}"
    );
    let anonymous = anonymous_get(link, &format!("{url}{secrets}"));
    ensure!(
        anonymous
            .as_ref()
            .is_err_and(|e| e.to_string().contains("401 Unauthorized")),
        "no credentials: {anonymous:?}"
    );
    let stranger = list(link, &stranger, &secrets);
    ensure!(
        stranger
            .as_ref()
            .is_err_and(|e| e.to_string().contains("cannot pass on")),
        "another client certificate: {stranger:?}"
    );
    // This node's certificate is the node: the gateway's identity, which may read secrets.
    let as_node = list(link, &node, &secrets)?;
    ensure!(as_node.contains("\"s-1\""), "the node's list: {as_node}");

    link.run("ip", &["link", "del", "yurthub-dummy0"])?;
    wait_until(Duration::from_secs(30), "yurthub-dummy0 made again", || {
        has_hub_address(link)
    })?;
    let again = list(link, &pod, &configmaps)?;
    ensure!(
        again.contains("\"cm-1\""),
        "after the link was made again: {again}"
    );
    let metrics = hub_get(env, link, hub, "/metrics")?;
    ensure!(
        metrics.contains("edgegate_hub_interface_repairs_total 1"),
        "repairs: {}",
        metrics
            .lines()
            .filter(|l| l.contains("hub_interface"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    link.cut()?;
    wait_until(
        Duration::from_secs(30),
        "the gateway to see the cloud gone",
        || hub_get(env, link, hub, "/v1/readyz").is_err(),
    )?;
    let offline = list(link, &pod, &configmaps)?;
    ensure!(
        offline.contains("\"cm-1\""),
        "offline, the pod's list: {offline}"
    );
    let unknown = list(link, &nobody, &configmaps);
    ensure!(
        unknown
            .as_ref()
            .is_err_and(|e| e.to_string().contains("has not seen it accept this token")),
        "offline, a token never accepted: {unknown:?}"
    );
    let anonymous_offline = anonymous_get(link, &format!("{url}{configmaps}"));
    ensure!(
        anonymous_offline
            .as_ref()
            .is_err_and(|e| e.to_string().contains("Unauthorized")),
        "offline, no credentials: {anonymous_offline:?}"
    );
    link.restore()?;
    Ok(())
}
