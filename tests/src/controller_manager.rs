//! kube-controller-manager for a [`Cluster`]: its CSR signer signs with the cluster's CA.

use anyhow::Result;

use crate::cluster::{ADMIN_TOKEN, Cluster, User};
use crate::process::Process;

/// Starts kube-controller-manager as admin against `cluster`, signing CSRs with the
/// cluster's CA, with `extra` flags (e.g. `--controllers=…`, `--cluster-signing-duration=…`).
pub fn start(cluster: &Cluster, extra: &[String]) -> Result<Process> {
    let kubeconfig = cluster.dir.join("controller-manager.kubeconfig");
    cluster.kubeconfig_for(&kubeconfig, &cluster.url(), &User::Token(ADMIN_TOKEN))?;
    let pki = &cluster.pki;
    let mut args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--root-ca-file={}", pki.ca_cert.display()),
        format!(
            "--service-account-private-key-file={}",
            pki.sa_key.display()
        ),
        format!("--cluster-signing-cert-file={}", pki.ca_cert.display()),
        format!("--cluster-signing-key-file={}", pki.ca_key.display()),
        format!(
            "--service-cluster-ip-range={}",
            cluster.options.service_cidr
        ),
        "--leader-elect=false".to_owned(),
        // No serving: nothing scrapes it, and fixed ports would collide between runs.
        "--port=0".to_owned(),
        "--secure-port=0".to_owned(),
        "--logtostderr=true".to_owned(),
        "--v=1".to_owned(),
    ];
    args.extend(extra.iter().cloned());
    Process::spawn(
        "kube-controller-manager",
        &cluster.tools().kube_controller_manager,
        &args,
        &cluster.dir.join("kube-controller-manager.log"),
    )
}
