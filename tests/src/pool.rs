//! Gateways of one node pool: each node with its own client and serving certificates (of the
//! cluster's CA), in a network namespace of a [`crate::lan::Lan`] with its own address,
//! where it serves the pool port; and the objects OpenYurt keeps for a pool (the nodes'
//! label, `leader-hub-<pool>`).

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cluster::{Cluster, User};
use crate::gateway::Gateway;
use crate::pki::NodePki;
use crate::process::free_port;

/// One node of a pool.
#[derive(Clone, Copy, Debug)]
pub struct PoolNode<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its pool.
    pub pool: &'a str,
    /// Its address on the pool's LAN.
    pub ip: &'a str,
    /// Its network namespace (`/run/netns/…`).
    pub netns: &'a Path,
    /// The pool port, the same for the whole pool.
    pub port: u16,
}

/// Node `name`'s certificates (the serving one for `ip`) and a kubeconfig of its client
/// certificate for `server`.
pub fn node_identity(
    cluster: &Cluster,
    name: &str,
    ip: &str,
    server: &str,
) -> Result<(PathBuf, NodePki)> {
    let dir = cluster.dir.join("pool");
    let pki = cluster.pki.issue_node(&dir, name, &[ip.to_owned()])?;
    let kubeconfig = dir.join(format!("{name}-{}.kubeconfig", free_port()?));
    cluster.kubeconfig_for(
        &kubeconfig,
        server,
        &User::Certificate(&pki.client_cert, &pki.client_key),
    )?;
    Ok((kubeconfig, pki))
}

/// Starts `bin` as `node`'s gateway, in its namespace, to `server` on
/// the node's own identity, with the multiplexer's Services and the `v1beta1`
/// EndpointSlices of the test cluster, and `extra` flags.
pub fn start_member(
    bin: &Path,
    cluster: &Cluster,
    server: &str,
    node: &PoolNode<'_>,
    extra: &[&str],
) -> Result<Gateway> {
    let (kubeconfig, pki) = node_identity(cluster, node.name, node.ip, server)?;
    let flags = [
        format!("--node-name={}", node.name),
        format!("--nodepool-name={}", node.pool),
        format!("--node-ip={}", node.ip),
        format!("--multiplexer-port={}", node.port),
        format!("--proxy-secure-port={}", free_port()?),
        format!("--tls-cert-file={}", pki.serving_cert.display()),
        format!("--tls-private-key-file={}", pki.serving_key.display()),
        "--pool-scope-resources=/v1/services,discovery.k8s.io/v1beta1/endpointslices".to_owned(),
    ];
    let flags: Vec<&str> = flags
        .iter()
        .map(String::as_str)
        .chain(extra.iter().copied())
        .collect();
    let place = (node.netns, node.ip.parse()?);
    Gateway::start_as_in(bin, cluster, server, &kubeconfig, place, &flags)
}

/// A Node object of `pool` (its `apps.openyurt.io/nodepool` label).
pub fn node_object(name: &str, pool: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"apps.openyurt.io/nodepool": pool}},
    })
    .to_string()
}

/// The ConfigMap yurt-manager writes for `pool`: `leaders` (`node/address,…`), election on.
pub fn leader_config_map(pool: &str, leaders: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("leader-hub-{pool}"), "namespace": "kube-system"},
        "data": {"leaders": leaders, "enable-leader-election": "true"},
    })
    .to_string()
}

/// Lets the nodes' identities read and write what they need: RBAC is not what the pool's
/// tests and benches measure.
pub fn let_nodes_in(cluster: &Cluster) -> Result<()> {
    cluster.kubectl(&[
        "create",
        "clusterrolebinding",
        "pool-nodes",
        "--clusterrole=cluster-admin",
        "--group=system:nodes",
    ])?;
    Ok(())
}
