//! edgegate as operators deploy it (`deploy/`): the image `deploy/build-image` makes, and the
//! static pod manifest `deploy/edgegate.yaml` fitted to a test node.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};
use base64::Engine;

use crate::bootstrap::BootstrapToken;
use crate::cluster::Cluster;

/// The repository's `deploy/` directory.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// The static pod manifest as shipped.
pub fn manifest() -> Result<String> {
    let path = dir().join("edgegate.yaml");
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// Builds the image of `binary` and the filters in `filters` as `tag` into the OCI archive
/// `output`, with `deploy/build-image`; what it printed.
pub fn build_image(binary: &Path, filters: &Path, tag: &str, output: &Path) -> Result<String> {
    let script = dir().join("build-image");
    let out = Command::new(&script)
        .arg("--binary")
        .arg(binary)
        .arg("--filters")
        .arg(filters)
        .args(["--tag", tag])
        .arg("--output")
        .arg(output)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    ensure!(
        out.status.success(),
        "{} failed ({}):\n{}{}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A bootstrap kubeconfig for `token` to `server`, the cluster CA inline (the gateway reads
/// it inside its container, where the harness's files are not).
pub fn bootstrap_kubeconfig(
    cluster: &Cluster,
    server: &str,
    token: &BootstrapToken,
) -> Result<String> {
    let ca = std::fs::read(&cluster.pki.ca_cert)?;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    Ok(serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "cloud", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "bootstrap", "user": {"token": token.join_token()}}],
        "contexts": [{"name": "bootstrap", "context": {"cluster": "cloud", "user": "bootstrap"}}],
        "current-context": "bootstrap",
    })
    .to_string())
}

/// What a test node changes in the shipped manifest: each `(shipped line, replacement)` must
/// be found, so that a manifest edited out of shape fails the test rather than passing it by.
pub fn fitted(manifest: &str, changes: &[(&str, String)]) -> Result<String> {
    let mut text = manifest.to_owned();
    for (line, replacement) in changes {
        ensure!(
            text.lines().any(|l| l == *line),
            "the manifest has no line {line:?}"
        );
        text = text
            .lines()
            .map(|l| if l == *line { replacement.as_str() } else { l })
            .collect::<Vec<_>>()
            .join("\n");
        text.push('\n');
    }
    Ok(text)
}
