//! The files operators deploy edgegate with (`deploy/`), checked by the tools that consume
//! them: the static pod manifest by kube-apiserver, the systemd unit by systemd. The image
//! runs on the real node (`tests/node`, `static_pod`).

use anyhow::{Context, Result, ensure};
use edgegate_testkit::deploy;

use crate::support::Env;

/// kube-apiserver takes the shipped manifest as it is (`kubectl apply --dry-run=server`):
/// a kube-system pod of priority class system-node-critical on the host network.
pub fn the_manifest_passes_server_side_dry_run(env: &Env) -> Result<()> {
    let path = deploy::dir().join("edgegate.yaml");
    let path = path.to_string_lossy();
    let out = env
        .cluster
        .kubectl(&["apply", "--dry-run=server", "-f", &path, "-o", "json"])?;
    let pod: serde_json::Value = serde_json::from_str(&out).context("the dry run's pod")?;
    ensure!(
        pod["metadata"]["namespace"] == "kube-system"
            && pod["spec"]["hostNetwork"] == true
            && pod["spec"]["priority"] == 2_000_001_000,
        "{out}"
    );
    let probe = &pod["spec"]["containers"][0]["livenessProbe"]["httpGet"];
    ensure!(
        probe["path"] == "/v1/healthz" && probe["port"] == 10267,
        "{probe}"
    );
    Ok(())
}

/// `systemd-analyze verify` finds nothing to say of the unit, on a root holding systemd's
/// own units and the binary where the unit runs it.
pub fn the_systemd_unit_verifies(env: &Env) -> Result<()> {
    let root = tempfile::tempdir()?;
    let root = root.path();
    let units = root.join("usr/lib/systemd");
    std::fs::create_dir_all(&units)?;
    let copied = std::process::Command::new("cp")
        .args(["-a", "/usr/lib/systemd/system"])
        .arg(&units)
        .status()?;
    ensure!(copied.success(), "copying systemd's units");
    std::fs::create_dir_all(root.join("usr/local/bin"))?;
    std::fs::copy(&env.bin, root.join("usr/local/bin/edgegate"))?;
    std::fs::create_dir_all(root.join("etc/systemd/system"))?;
    std::fs::copy(
        deploy::dir().join("edgegate.service"),
        root.join("etc/systemd/system/edgegate.service"),
    )?;
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .arg("edgegate.service")
        .output()
        .context("running systemd-analyze")?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify ({}):\n{said}",
        out.status
    );
    Ok(())
}
