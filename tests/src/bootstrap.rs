//! What kubeadm sets up so that nodes join with a bootstrap token: the token's Secret, the
//! RBAC that lets its group request node certificates (approved automatically, as are a
//! node's renewals), and the `kube-public/cluster-info` ConfigMap anyone may read (the
//! cluster's kubeconfig without credentials; kube-controller-manager's bootstrapsigner
//! signs it with each token).

use std::time::Duration;

use anyhow::{Context, Result};
use rcgen::PublicKeyData;
use sha2::{Digest, Sha256};

use crate::cluster::Cluster;
use crate::process::wait_until;

/// kubeadm's group for tokens of joining nodes.
pub const NODE_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";

/// A bootstrap token, `<id>.<secret>`.
#[derive(Clone, Debug)]
pub struct BootstrapToken {
    /// `[a-z0-9]{6}`.
    pub id: String,
    /// `[a-z0-9]{16}`.
    pub secret: String,
}

impl BootstrapToken {
    /// A token with a random secret.
    pub fn random(id: &str) -> BootstrapToken {
        let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let digest = Sha256::digest(format!("{id}{nanos}{}", std::process::id()));
        let secret = digest
            .iter()
            .take(16)
            .map(|b| alphabet[usize::from(*b) % alphabet.len()] as char)
            .collect();
        BootstrapToken {
            id: id.to_owned(),
            secret,
        }
    }

    /// `--join-token`'s value.
    pub fn join_token(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }
}

/// kubeadm's pin of the cluster CA: `sha256:` and the hex SHA-256 of its
/// SubjectPublicKeyInfo (from the CA's key, so that it does not rely on parsing the
/// certificate the gateway parses).
pub fn ca_pin(cluster: &Cluster) -> Result<String> {
    let key = rcgen::KeyPair::from_pem(&std::fs::read_to_string(&cluster.pki.ca_key)?)?;
    let digest = Sha256::digest(key.subject_public_key_info());
    Ok(format!(
        "sha256:{}",
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    ))
}

/// Creates `token`'s Secret, kubeadm's RBAC for joining nodes and cluster-info, and waits
/// until the bootstrapsigner has signed cluster-info with the token.
pub fn seed(cluster: &Cluster, token: &BootstrapToken) -> Result<()> {
    use base64::Engine;
    let ca = std::fs::read(&cluster.pki.ca_cert)?;
    let ca_data = base64::engine::general_purpose::STANDARD.encode(ca);
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    server: {}\n    certificate-authority-data: {ca_data}\ncontexts: []\nusers: []\n",
        cluster.url()
    );
    let binding = |name: &str, role: &str, kind: &str, subject: &str| {
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}],
        })
    };
    let items = serde_json::json!([
        {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
         "metadata": {"name": format!("bootstrap-token-{}", token.id), "namespace": "kube-system"},
         "stringData": {
            "token-id": token.id, "token-secret": token.secret,
            "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
            "auth-extra-groups": NODE_TOKEN_GROUP}},
        binding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", "Group", NODE_TOKEN_GROUP),
        binding("kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient", "Group", NODE_TOKEN_GROUP),
        binding("kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "Group", "system:nodes"),
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "cluster-info", "namespace": "kube-public"},
         "data": {"kubeconfig": kubeconfig}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "kubeadm:bootstrap-signer-clusterinfo", "namespace": "kube-public"},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "kubeadm:bootstrap-signer-clusterinfo", "namespace": "kube-public"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubeadm:bootstrap-signer-clusterinfo"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}]},
    ]);
    cluster.apply(
        &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    )?;
    let key = format!("jws-kubeconfig-{}", token.id);
    wait_until(
        Duration::from_secs(60),
        "cluster-info signed with the token",
        || {
            cluster
                .kubectl(&[
                    "get",
                    "configmap",
                    "cluster-info",
                    "-n",
                    "kube-public",
                    "-o",
                    "json",
                ])
                .is_ok_and(|json| json.contains(&key))
        },
    )
    .context("is kube-controller-manager's bootstrapsigner running?")
}

/// The signer of node serving certificates, whose requests kube-controller-manager signs
/// and leaves to an approver.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// The cluster's CertificateSigningRequests.
pub fn csrs(cluster: &Cluster) -> Result<Vec<serde_json::Value>> {
    let list: serde_json::Value =
        serde_json::from_str(&cluster.kubectl(&["get", "csr", "-o", "json"])?)?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// The names of `node`'s serving requests nobody approved or denied yet.
pub fn pending_serving_requests(cluster: &Cluster, node: &str) -> Result<Vec<String>> {
    let user = format!("system:node:{node}");
    Ok(csrs(cluster)?
        .iter()
        .filter(|csr| csr["spec"]["signerName"] == SERVING_SIGNER)
        .filter(|csr| csr["spec"]["username"] == user.as_str())
        .filter(|csr| csr["status"]["conditions"].is_null())
        .filter_map(|csr| csr["metadata"]["name"].as_str().map(str::to_owned))
        .collect())
}

/// Waits for `node`'s serving request and approves it, as OpenYurt's yurt-manager does.
pub fn approve_serving_request(cluster: &Cluster, node: &str) -> Result<()> {
    wait_until(
        Duration::from_secs(120),
        "the node's serving request",
        || pending_serving_requests(cluster, node).is_ok_and(|p| !p.is_empty()),
    )?;
    for name in pending_serving_requests(cluster, node)? {
        cluster.kubectl(&["certificate", "approve", &name])?;
    }
    Ok(())
}
