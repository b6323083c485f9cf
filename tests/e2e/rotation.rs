//! Credentials files rotated on disk are used without a restart.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::process::{free_port, wait_until};
use edgegate_testkit::{Gateway, User};

use crate::support::Env;

/// kubelet rotates its client certificate by writing a new `kubelet-client-<time>.pem` and
/// re-pointing the symlink `kubelet-client-current.pem` at it. A gateway whose kubeconfig
/// names that symlink acts, at the next request after a rotation, as the identity of the new
/// certificate: here from `edgegate` (group `system:masters`, may list secrets) to
/// `edgegate-rotated` (no group, may not), with no restart.
pub fn a_rotated_client_certificate_is_used_without_a_restart(env: &Env) -> Result<()> {
    follows_rotations(env, "rotation", |current, dir| {
        let kubeconfig = dir.join("gateway.kubeconfig");
        env.cluster.kubeconfig_for(
            &kubeconfig,
            &env.cluster.url(),
            &User::Certificate(current, current),
        )?;
        Gateway::start_as(&env.bin, &env.cluster, &kubeconfig, &[])
    })
}

/// `--bootstrap-mode kubeletcertificate`, as YurtHub's: no kubeconfig, no token; the
/// gateway's identity is kubelet's client certificate file (`--kubelet-client-certificate`,
/// with the CA of `--kubelet-ca-file`), followed as kubelet rotates it.
pub fn kubelets_certificate_is_the_identity_in_kubeletcertificate_mode(env: &Env) -> Result<()> {
    follows_rotations(env, "kubeletcert", |current, dir| {
        let flags = [
            "--bootstrap-mode=kubeletcertificate".to_owned(),
            format!("--kubelet-client-certificate={}", current.display()),
            format!("--kubelet-ca-file={}", env.cluster.pki.ca_cert.display()),
            format!("--root-dir={}", dir.join("root").display()),
            "--node-name=edge-kubeletcert".to_owned(),
            // Its serving request is never approved here; the port must not be shared.
            format!("--proxy-secure-port={}", free_port()?),
        ];
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        Gateway::start_without_kubeconfig(&env.bin, &env.cluster, &flags)
    })
}

/// A gateway `start`ed on the pair file `kubelet-client-current.pem` (in a directory of its
/// own) acts as that pair's identity, then, with no restart, as the one it is rotated to.
fn follows_rotations(
    env: &Env,
    name: &str,
    start: impl Fn(&Path, &Path) -> Result<Gateway>,
) -> Result<()> {
    let dir = env.cluster.dir.join(crate::support::unique(name));
    std::fs::create_dir_all(&dir)?;
    let pki = &env.cluster.pki;
    let current = dir.join("kubelet-client-current.pem");
    rotate(&dir, "1", &pki.gateway_cert, &pki.gateway_key)?;
    let mut gateway = start(&current, &dir)?;
    let pid = gateway.process().context("running")?.pid();

    let can_list_secrets = |gateway: &Gateway| -> Result<String> {
        // kubectl exits 1 when the answer is "no".
        let output = std::process::Command::new(&env.tools.kubectl)
            .arg("--kubeconfig")
            .arg(&gateway.anonymous_kubeconfig)
            .args(["auth", "can-i", "list", "secrets", "-n", "default"])
            .output()?;
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let before = can_list_secrets(&gateway)?;
    ensure!(
        before == "yes",
        "as edgegate (system:masters): {before}\n{}",
        gateway.log_tail(20)
    );

    rotate(&dir, "2", &pki.rotated_cert, &pki.rotated_key)?;
    // The files are looked at every 2 s at most; 30 s only guards against a hang.
    wait_until(
        Duration::from_secs(30),
        "the rotated identity to be used",
        || can_list_secrets(&gateway).is_ok_and(|answer| answer == "no"),
    )
    .with_context(|| gateway.log_tail(20))?;
    ensure!(
        gateway.process().context("still running")?.pid() == pid,
        "the gateway was not restarted"
    );
    Ok(())
}

/// Writes the pair as one PEM file `kubelet-client-<version>.pem` and points
/// `kubelet-client-current.pem` at it, as kubelet does.
fn rotate(dir: &Path, version: &str, cert: &Path, key: &Path) -> Result<()> {
    let file = dir.join(format!("kubelet-client-{version}.pem"));
    let pem = format!(
        "{}{}",
        std::fs::read_to_string(cert)?,
        std::fs::read_to_string(key)?
    );
    std::fs::write(&file, pem)?;
    let staged = dir.join(".kubelet-client-current.pem.tmp");
    std::os::unix::fs::symlink(&file, &staged)?;
    std::fs::rename(&staged, dir.join("kubelet-client-current.pem"))?;
    Ok(())
}
