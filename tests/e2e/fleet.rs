//! Filters for a fleet: components pushed to a real registry (Debian's `docker-registry`,
//! TLS from its own CA, htpasswd logins), declared in ConfigMap
//! `kube-system/edgegate-filters` on a real kube-apiserver with the Node authorizer, and
//! run by two gateways with their nodes' own identities, one per pool. A canary for one
//! pool runs there only; a wrong digest, a corrupt blob, a version that does not load and a
//! registry that is down each
//! leave the running version serving, with the reason on the Node; a gateway restarted cut
//! off from the cloud and the registry runs the declared set from its store, and reports it
//! to the cloud once the link is back.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::cluster::{ClusterOptions, User};
use edgegate_testkit::registry::Registry;
use edgegate_testkit::{Cluster, Gateway, Relay, http, process::wait_until};
use serde_json::Value;
use sha2::Digest as _;

use crate::support::{Env, apply, client, get_accepting, runtime, wait_readyz};
use crate::topology::nodes_and_pools;

/// The declared filter's name.
const FILTER: &str = "stamp";
/// The component tagger's own name for the components it applies to.
const AGENT: &str = "test/1.0";

/// A ClusterRole reading NodePools, bound to every node.
const NODEPOOLS_RBAC: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
   "metadata": {"name": "fleet-nodepools"},
   "rules": [{"apiGroups": ["apps.openyurt.io"], "resources": ["nodepools"], "verbs": ["get", "list", "watch"]}]},
  {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
   "metadata": {"name": "fleet-nodepools"},
   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "fleet-nodepools"},
   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]}]}"#;

/// A node's gateway: the node, its relay to the cloud, the gateway.
struct Node {
    name: &'static str,
    relay: Relay,
    gateway: Gateway,
}

pub fn filters_declared_in_the_cluster_roll_out_by_pool_and_outlive_a_bad_registry(
    env: &Env,
) -> Result<()> {
    let options = ClusterOptions {
        node: Some("edge-1".into()),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with(&env.tools, env.etcd.clone(), options)?;
    let scratch = cluster.dir.join("fleet");
    std::fs::create_dir_all(&scratch)?;
    nodes_and_pools(&cluster, &scratch, ["edge-1", "edge-2", "edge-3"])?;
    let rbac = repo().join("deploy/filter-fleet-rbac.yaml");
    cluster.kubectl(&["apply", "-f", &rbac.display().to_string()])?;
    // What OpenYurt grants nodes besides: reading NodePools (the gateway's informers do).
    apply(&cluster, &scratch, "nodepools-rbac.json", NODEPOOLS_RBAC)?;
    let mut registry = Registry::start(&scratch.join("registry"))?;

    // Four versions of one filter: tagger, and tagger with a custom section that changes
    // its digest and nothing else.
    let tagger = edgegate_testkit::filters::built(&["tagger"])?.join("tagger.wasm");
    let tagger = std::fs::read(tagger)?;
    let mut versions = Vec::new();
    for n in 1..=4u8 {
        let bytes = variant(&tagger, n);
        let file = scratch.join(format!("stamp-v{n}.wasm"));
        std::fs::write(&file, &bytes)?;
        let image = push(env, &registry, &file, &format!("filters/stamp:v{n}"))?;
        versions.push((image, sha256(&bytes)));
    }
    let [v1, v2, v3, v4] = [0, 1, 2, 3].map(|i| versions[i].clone());

    let mut hangzhou = node(env, &cluster, &registry, &scratch, "edge-1")?;
    let shanghai = node(env, &cluster, &registry, &scratch, "edge-3")?;

    // Declared for every node: running on both, and on the Nodes' reports.
    let started = Instant::now();
    declare(&cluster, &scratch, &v1.0, None)?;
    wait_running(&hangzhou, &v1.1)?;
    wait_running(&shanghai, &v1.1)?;
    println!(
        "fleet: declared to running on both gateways in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let trail = tagged_trail(&hangzhou.gateway)?;
    ensure!(trail == "fleet", "the declared filter's work: {trail:?}");
    wait_report(&cluster, &hangzhou, &v1.0, "loaded")?;
    wait_report(&cluster, &shanghai, &v1.0, "loaded")?;

    // A canary for hangzhou: there and not in shanghai.
    declare(&cluster, &scratch, &v1.0, Some(&v2.0))?;
    wait_running(&hangzhou, &v2.1)?;
    wait_report(&cluster, &hangzhou, &v2.0, "loaded")?;
    ensure!(
        running(&shanghai).as_deref() == Some(v1.1.as_str()),
        "shanghai ran the canary"
    );
    // Widened: every node.
    declare(&cluster, &scratch, &v2.0, None)?;
    wait_running(&shanghai, &v2.1)?;
    wait_report(&cluster, &shanghai, &v2.0, "loaded")?;

    // A digest the registry does not have.
    let missing = format!(
        "{}/filters/stamp@sha256:{}",
        registry.host,
        sha256(b"no such manifest")
    );
    declare(&cluster, &scratch, &v2.0, Some(&missing))?;
    let report = wait_report(&cluster, &hangzhou, &missing, "failed")?;
    keeps_serving(&hangzhou, &v2, &report, "HTTP 404")?;

    // A blob damaged in the registry's storage.
    let layer = format!("sha256:{}", v4.1);
    let blob = registry.blob_file(&layer);
    let mut bytes = std::fs::read(&blob)?;
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, &bytes)?;
    declare(&cluster, &scratch, &v2.0, Some(&v4.0))?;
    let report = wait_report(&cluster, &hangzhou, &v4.0, "failed")?;
    keeps_serving(&hangzhou, &v2, &report, "digest is")?;

    // A version that does not load (another filter, whose config schema refuses `tag`).
    let nodestamp = edgegate_testkit::filters::built(&["nodestamp"])?.join("nodestamp.wasm");
    let unfit = push(env, &registry, &nodestamp, "filters/stamp:unfit")?;
    declare(&cluster, &scratch, &v2.0, Some(&unfit))?;
    let report = wait_report(&cluster, &hangzhou, &unfit, "failed")?;
    keeps_serving(&hangzhou, &v2, &report, "config")?;

    // The registry down; back up, the pull is retried and the canary runs.
    registry.stop()?;
    declare(&cluster, &scratch, &v2.0, Some(&v3.0))?;
    let report = wait_report(&cluster, &hangzhou, &v3.0, "failed")?;
    keeps_serving(&hangzhou, &v2, &report, "pull failed")?;
    registry.restart()?;
    wait_running(&hangzhou, &v3.1)?;
    wait_report(&cluster, &hangzhou, &v3.0, "loaded")?;
    ensure!(
        running(&shanghai).as_deref() == Some(v2.1.as_str()),
        "shanghai ran a canary"
    );

    // Booted cut off from the cloud and the registry: the declared set, from the store.
    registry.stop()?;
    hangzhou.relay.cut();
    hangzhou.gateway.restart()?;
    wait_running(&hangzhou, &v3.1).with_context(|| hangzhou.gateway.log_tail(30))?;
    // Its report while cut was answered by the gateway itself: once the link is back it is
    // written to the cloud again (here over an annotation removed meanwhile).
    cluster.kubectl(&["annotate", "node", hangzhou.name, "edgegate.io/filters-"])?;
    hangzhou.relay.restore();
    wait_report(&cluster, &hangzhou, &v3.0, "loaded")?;
    drop(shanghai);
    Ok(())
}

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Hex SHA-256 of `bytes`.
fn sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `component` with a custom section naming `n` appended: another digest, the same filter.
fn variant(component: &[u8], n: u8) -> Vec<u8> {
    let name = b"edgegate-test-variant";
    let mut bytes = component.to_vec();
    // Section id 0 (custom), its size, the name's length and the name, then the payload.
    bytes.extend([0, (1 + name.len() + 1) as u8, name.len() as u8]);
    bytes.extend(name);
    bytes.push(n);
    bytes
}

/// Pushes `file` to `repository` of `registry` with `edgegate filter push`: the pinned
/// reference it prints.
fn push(env: &Env, registry: &Registry, file: &Path, repository: &str) -> Result<String> {
    let output = std::process::Command::new(&env.bin)
        .arg("filter")
        .arg("push")
        .arg(format!(
            "--filter-registry-ca={}",
            registry.ca_cert.display()
        ))
        .arg(format!(
            "--filter-registry-config={}",
            registry.auth_file.display()
        ))
        .arg(file)
        .arg(format!("{}/{repository}", registry.host))
        .output()?;
    ensure!(
        output.status.success(),
        "edgegate filter push: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let image = String::from_utf8(output.stdout)?.trim().to_owned();
    ensure!(image.contains("@sha256:"), "not pinned: {image}");
    Ok(image)
}

/// The gateway of node `name`, with its own identity, through a relay of its own, following
/// the declaration.
fn node(
    env: &Env,
    cluster: &Cluster,
    registry: &Registry,
    scratch: &Path,
    name: &'static str,
) -> Result<Node> {
    let dir = scratch.join(name);
    std::fs::create_dir_all(&dir)?;
    let pki = cluster.pki.issue_node(&dir, name, &[])?;
    let relay = Relay::start(([127, 0, 0, 1], cluster.port).into())?;
    let kubeconfig = dir.join("node.kubeconfig");
    cluster.kubeconfig_for(
        &kubeconfig,
        &relay.url(),
        &User::Certificate(&pki.client_cert, &pki.client_key),
    )?;
    let gateway = Gateway::start_as_to(
        &env.bin,
        cluster,
        &relay.url(),
        &kubeconfig,
        &[
            "--filter-fleet",
            &format!("--node-name={name}"),
            &format!("--filter-registry-ca={}", registry.ca_cert.display()),
            &format!("--filter-registry-config={}", registry.auth_file.display()),
        ],
    )?;
    wait_readyz(&gateway, 200, "the gateway to be ready")?;
    Ok(Node {
        name,
        relay,
        gateway,
    })
}

/// Declares the filter: `image` for every node, `canary` for pool hangzhou.
fn declare(cluster: &Cluster, scratch: &Path, image: &str, canary: Option<&str>) -> Result<()> {
    let mut toml = format!("image = \"{image}\"\non-error = \"keep\"\n");
    if let Some(canary) = canary {
        toml.push_str(&format!(
            "[[canary]]\npools = [\"hangzhou\"]\nimage = \"{canary}\"\n"
        ));
    }
    toml.push_str("[config]\ntag = \"fleet\"\n");
    let map = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "edgegate-filters", "namespace": "kube-system"},
        "data": {format!("{FILTER}.toml"): toml}});
    apply(cluster, scratch, "declaration.json", &map.to_string())
}

/// The hash of the declared filter in the node's chain, if it runs there.
fn running(node: &Node) -> Option<String> {
    let chain: Value = http::get(node.gateway.hub, "/v1/filters")
        .ok()
        .and_then(|r| serde_json::from_str(&r.body).ok())?;
    let filter = chain["filters"]
        .as_array()?
        .iter()
        .find(|f| f["name"] == FILTER && f["source"] == "cluster" && f["status"] == "active")?;
    filter["hash"].as_str().map(str::to_owned)
}

/// Waits until the node's chain runs the component of hash `hash`.
fn wait_running(node: &Node, hash: &str) -> Result<()> {
    let mut seen = None;
    wait_until(
        Duration::from_secs(60),
        "the declared filter to run",
        || {
            seen = running(node);
            seen.as_deref() == Some(hash)
        },
    )
    .with_context(|| format!("{}: running {seen:?}, not {hash}", node.name))
}

/// The node's report of the filter, read from the cloud as an operator reads it.
fn report(cluster: &Cluster, node: &Node) -> Result<Value> {
    let text = cluster.kubectl(&[
        "get",
        "node",
        node.name,
        "-o",
        "jsonpath={.metadata.annotations.edgegate\\.io/filters}",
    ])?;
    let report: Value = serde_json::from_str(&text).unwrap_or_default();
    Ok(report[FILTER].clone())
}

/// Waits until the node reports `image` with `status`: the report.
fn wait_report(cluster: &Cluster, node: &Node, image: &str, status: &str) -> Result<Value> {
    let mut seen = Value::Null;
    wait_until(Duration::from_secs(60), "the node's report", || {
        seen = report(cluster, node).unwrap_or_default();
        seen["image"] == image && seen["status"] == status
    })
    .with_context(|| format!("{}: {seen}, not {image} {status}", node.name))?;
    Ok(seen)
}

/// The node still runs `version`, and its report names it as running with `reason`.
fn keeps_serving(
    node: &Node,
    version: &(String, String),
    report: &Value,
    reason: &str,
) -> Result<()> {
    ensure!(
        running(node).as_deref() == Some(version.1.as_str()),
        "{}: the running version was replaced: {report}",
        node.name
    );
    ensure!(
        report["running"] == version.0.as_str(),
        "{}: {report}",
        node.name
    );
    let why = report["reason"].as_str().unwrap_or_default();
    ensure!(
        why.contains(reason),
        "{}: the reason {why:?} lacks {reason:?}",
        node.name
    );
    Ok(())
}

/// The filter's trail on the declaration itself, read through the gateway as component
/// `test` (one tagger applies to).
fn tagged_trail(gateway: &Gateway) -> Result<String> {
    let url = format!(
        "{}/api/v1/namespaces/kube-system/configmaps/edgegate-filters",
        gateway.url()
    );
    let (status, body) =
        runtime().block_on(get_accepting(&client(), &url, AGENT, "application/json"))?;
    ensure!(status == 200, "GET the declaration as {AGENT}: {status}");
    let object: Value = serde_json::from_slice(&body)?;
    Ok(object["metadata"]["annotations"]["edgegate.test/trail"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}
