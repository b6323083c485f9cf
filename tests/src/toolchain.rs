//! The binaries the cluster and the node run: etcd, kube-apiserver, kube-controller-manager,
//! kubelet, kube-proxy and kubectl (1.20 and a current one), provisioned on first use.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Paths of the control-plane binaries.
#[derive(Clone, Debug)]
pub struct Toolchain {
    /// etcd.
    pub etcd: PathBuf,
    /// kube-apiserver 1.20.2, built from Debian's source package.
    pub kube_apiserver: PathBuf,
    /// kubectl 1.20.2, from Debian's kubernetes-client.
    pub kubectl: PathBuf,
    /// A current kubectl, from Debian sid's kubectl (1.36 when added): it tries WebSocket
    /// before SPDY for exec, attach and port-forward. Only the node's exec scenario runs it.
    pub kubectl_current: PathBuf,
    /// kube-controller-manager 1.20.2 (the node's cloud), built like kube-apiserver.
    pub kube_controller_manager: PathBuf,
    /// kubelet 1.20.2 (the node), built like kube-apiserver but with cgo.
    pub kubelet: PathBuf,
    /// kube-proxy 1.20.2 (the node), built like kube-apiserver.
    pub kube_proxy: PathBuf,
}

impl Toolchain {
    /// Runs `tests/cluster/provision.sh` (which only checks when everything is in place) and
    /// returns the binaries it vouches for. `EDGEGATE_K8S_BIN` names a directory holding
    /// kube-apiserver and kubectl and skips provisioning (the node's binaries are looked for
    /// there too, and only a node needs them: see [`Toolchain::check_node`]; the current
    /// kubectl as `kubectl-current/kubectl`, which only the exec scenario needs).
    pub fn provision() -> Result<Toolchain> {
        let bin_dir = match std::env::var_os("EDGEGATE_K8S_BIN") {
            Some(dir) => PathBuf::from(dir),
            None => {
                let script = concat!(env!("CARGO_MANIFEST_DIR"), "/cluster/provision.sh");
                // Its steps (`[provision] …`, with their expected times) go to the terminal
                // as they start: a first run builds for minutes.
                let output = Command::new("bash")
                    .arg(script)
                    .stderr(std::process::Stdio::inherit())
                    .output()
                    .context("running tests/cluster/provision.sh")?;
                if !output.status.success() {
                    bail!("tests/cluster/provision.sh failed (its output is above)");
                }
                let stdout = String::from_utf8(output.stdout)?;
                PathBuf::from(
                    stdout
                        .lines()
                        .last()
                        .context("provision.sh printed nothing")?,
                )
            }
        };
        let etcd = which("etcd").context("etcd is not installed")?;
        let tools = Toolchain {
            etcd,
            kube_apiserver: bin_dir.join("kube-apiserver"),
            kubectl: bin_dir.join("kubectl"),
            kubectl_current: bin_dir.join("kubectl-current/kubectl"),
            kube_controller_manager: bin_dir.join("kube-controller-manager"),
            kubelet: bin_dir.join("kubelet"),
            kube_proxy: bin_dir.join("kube-proxy"),
        };
        for path in [&tools.kube_apiserver, &tools.kubectl] {
            if !path.is_file() {
                bail!(
                    "{} is missing; run tests/cluster/provision.sh",
                    path.display()
                );
            }
        }
        Ok(tools)
    }

    /// Fails unless the node's binaries are in place: kube-controller-manager, kubelet and
    /// kube-proxy, and containerd, runc, ctr, iptables, nsenter, ip, tc and busybox from Debian.
    pub fn check_node(&self) -> Result<()> {
        for path in [
            &self.kube_controller_manager,
            &self.kubelet,
            &self.kube_proxy,
        ] {
            if !path.is_file() {
                bail!(
                    "{} is missing; run tests/cluster/provision.sh",
                    path.display()
                );
            }
        }
        for program in [
            "containerd",
            "containerd-shim-runc-v2",
            "runc",
            "ctr",
            "iptables-save",
            "nsenter",
            "ip",
            "tc",
            "busybox",
        ] {
            which(program).with_context(|| {
                format!("{program} is not installed; run tests/cluster/provision.sh")
            })?;
        }
        Ok(())
    }
}

/// The first `program` on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| PathBuf::from(dir).join(program))
        .find(|path| path.is_file())
}
