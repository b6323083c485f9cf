//! The node's only image, without a registry: an OCI image archive made from the host's
//! static busybox, imported into containerd with `ctr images import`. It is also the pod
//! sandbox (its entrypoint only sleeps).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::netns::run;

/// The image's name as containerd stores it (`io.containerd.image.name`).
pub const IMAGE: &str = "docker.io/edgegate/busybox:test";

/// The busybox applets the image links in `/bin`: what the pods and the tests run.
const APPLETS: &[&str] = &[
    "sh", "sleep", "env", "cat", "ls", "ps", "wget", "true", "echo", "hostname", "httpd",
];

/// Writes the OCI image archive of [`IMAGE`] into `dir` and returns its path.
pub fn busybox_archive(dir: &Path) -> Result<PathBuf> {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .context("busybox (busybox-static) is not installed")?;
    let root = dir.join("image");
    let _ = std::fs::remove_dir_all(&root);
    let rootfs = root.join("rootfs");
    let layout = root.join("layout");
    let blobs = layout.join("blobs/sha256");
    std::fs::create_dir_all(rootfs.join("bin"))?;
    std::fs::create_dir_all(&blobs)?;
    std::fs::copy(busybox, rootfs.join("bin/busybox"))?;
    for applet in APPLETS {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet))?;
    }
    // The same bytes on every run: sorted, owned by root, at the epoch.
    let layer_tar = root.join("layer.tar");
    run(Command::new("tar")
        .args([
            "--sort=name",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "--mtime=@0",
        ])
        .arg("-C")
        .arg(&rootfs)
        .arg("-cf")
        .arg(&layer_tar)
        .arg("bin"))?;
    let layer = std::fs::read(&layer_tar)?;
    let layer = blob(&blobs, &layer)?;
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/bin/sleep", "2147483647"], "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [layer.0]},
    });
    let config = blob(&blobs, serde_json::to_string(&config)?.as_bytes())?;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config.0, "size": config.1},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer.0, "size": layer.1}],
    });
    let manifest = blob(&blobs, serde_json::to_string(&manifest)?.as_bytes())?;
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest.0,
            "size": manifest.1,
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": IMAGE, "org.opencontainers.image.ref.name": "test"},
        }],
    });
    std::fs::write(layout.join("index.json"), serde_json::to_string(&index)?)?;
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;
    let archive = root.join("busybox.oci.tar");
    run(Command::new("tar")
        .arg("-C")
        .arg(&layout)
        .arg("-cf")
        .arg(&archive)
        .args(["oci-layout", "index.json", "blobs"]))?;
    Ok(archive)
}

/// Stores `bytes` under their digest; the digest (`sha256:…`) and size.
fn blob(blobs: &Path, bytes: &[u8]) -> Result<(String, usize)> {
    let hex = Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        });
    std::fs::write(blobs.join(&hex), bytes)?;
    Ok((format!("sha256:{hex}"), bytes.len()))
}
