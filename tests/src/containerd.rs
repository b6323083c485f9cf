//! The node's container runtime: containerd with its own config, root, state, socket and
//! runc root under the node's directory, in the node's network namespace, pods on a CNI
//! bridge, and the busybox image imported.
//!
//! What containerd starts outlives it: the shims re-parent themselves to init, containers
//! are their children, and the pods' network namespaces are bind mounts. [`Containerd::clean`]
//! removes them all by what is ours (the runc root, the socket a shim names, the mounts
//! under our directory), never by a program's name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::image;
use crate::netns::{Link, run};
use crate::process::{Process, wait_until};

/// A containerd serving the CRI for one node.
#[derive(Debug)]
pub struct Containerd {
    /// Its directory: config, root, state, runc root, CNI config.
    pub dir: PathBuf,
    /// Its socket (kubelet's `--container-runtime-endpoint`).
    pub socket: PathBuf,
    process: Option<Process>,
    netns: PathBuf,
}

impl Containerd {
    /// Writes the config into `dir`, starts containerd in `link`'s namespace, and imports
    /// [`image::IMAGE`].
    pub fn start(link: &Link, dir: &Path) -> Result<Containerd> {
        std::fs::create_dir_all(dir.join("net.d"))?;
        let socket = dir.join("containerd.sock");
        std::fs::write(dir.join("config.toml"), config(dir, &socket))?;
        std::fs::write(
            dir.join("net.d/10-edgegate.conflist"),
            cni_config(dir, &link.pod_cidr()),
        )?;
        let mut containerd = Containerd {
            dir: dir.to_owned(),
            socket,
            process: None,
            netns: link.path(),
        };
        containerd.restart()?;
        containerd.import(&image::busybox_archive(dir)?)?;
        Ok(containerd)
    }

    /// Starts containerd (again, after [`Containerd::stop`]) and waits until it answers.
    pub fn restart(&mut self) -> Result<()> {
        let args = vec![
            format!("--net={}", self.netns.display()),
            "--".to_owned(),
            "containerd".to_owned(),
            "--config".to_owned(),
            self.dir.join("config.toml").display().to_string(),
        ];
        let mut process = Process::spawn(
            "containerd",
            Path::new("nsenter"),
            &args,
            &self.dir.join("containerd.log"),
        )?;
        let up = wait_until(Duration::from_secs(30), "containerd", || {
            self.ctr(&["version"]).is_ok()
        });
        if let Err(error) = up {
            process.check_running()?;
            return Err(error.context(process.log_tail(20)));
        }
        self.process = Some(process);
        Ok(())
    }

    /// Stops containerd alone; its shims and containers keep running, as on a real node.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.terminate(Duration::from_secs(5));
        }
    }

    /// Imports the image archive `archive` (OCI or Docker) for kubelet's pods.
    pub fn import(&self, archive: &Path) -> Result<String> {
        self.ctr(&[
            "images",
            "import",
            "--snapshotter",
            SNAPSHOTTER,
            &archive.to_string_lossy(),
        ])
    }

    /// Runs `ctr -n k8s.io args` against this containerd; its stdout.
    pub fn ctr(&self, args: &[&str]) -> Result<String> {
        run(Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", "k8s.io"])
            .args(args))
    }

    /// The running tasks (containers and sandboxes): id → pid.
    pub fn running_tasks(&self) -> Result<BTreeMap<String, u32>> {
        let listing = self.ctr(&["tasks", "ls"])?;
        let mut tasks = BTreeMap::new();
        for line in listing.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if let [id, pid, "RUNNING"] = fields[..] {
                tasks.insert(id.to_owned(), pid.parse().context("a task's pid")?);
            }
        }
        Ok(tasks)
    }

    /// The running containers of pods (sandboxes left out): pod name → pid.
    pub fn pod_containers(&self) -> Result<BTreeMap<String, u32>> {
        let mut pods = BTreeMap::new();
        for (id, pid) in self.running_tasks()? {
            // A task may end between the two calls: it is then not running.
            let Ok(info) = self.ctr(&["containers", "info", &id]) else {
                continue;
            };
            let info: serde_json::Value = serde_json::from_str(&info)?;
            let labels = &info["Labels"];
            if labels["io.cri-containerd.kind"] == "container"
                && let Some(pod) = labels["io.kubernetes.pod.name"].as_str()
            {
                pods.insert(pod.to_owned(), pid);
            }
        }
        Ok(pods)
    }

    /// Kills every container, every shim and containerd, and unmounts what they mounted
    /// under its directory.
    pub fn clean(&mut self) {
        clean_runtime(&self.dir);
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
        unmount_under(&self.dir);
    }
}

/// Removes what the containerd of `dir` started: its containers (by its runc root), its
/// shims and anything else naming its socket, and the mounts under `dir`.
pub(crate) fn clean_runtime(dir: &Path) {
    let runc_root = dir.join("runc/k8s.io");
    if let Ok(ids) = run(Command::new("runc")
        .arg("--root")
        .arg(&runc_root)
        .args(["list", "-q"]))
    {
        for id in ids.lines().filter(|id| !id.is_empty()) {
            let _ = Command::new("runc")
                .arg("--root")
                .arg(&runc_root)
                .args(["delete", "--force", id])
                .output();
        }
    }
    let socket = dir.join("containerd.sock").display().to_string();
    for pid in pids_whose_command_line_has(&socket) {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .output();
    }
    unmount_under(dir);
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.clean();
    }
}

/// overlayfs works on these machines' ext4; a machine where it does not would need `native`.
const SNAPSHOTTER: &str = "overlayfs";

fn config(dir: &Path, socket: &Path) -> String {
    let d = dir.display();
    let s = socket.display();
    format!(
        r#"version = 2
root = "{d}/root"
state = "{d}/state"
# Plugins that would look outside our directories or for kernels features not here.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{s}"
[ttrpc]
  address = "{s}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{image}"
  # Lowering oom_score_adj is refused on these machines, and runc then fails with
  # "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  # The pods' network namespaces under our state dir, not in the host's /run/netns.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "{SNAPSHOTTER}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{d}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d}/net.d"
"#,
        image = image::IMAGE,
    )
}

fn cni_config(dir: &Path, pod_cidr: &str) -> String {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": "edgegate-node",
        "plugins": [{
            "type": "bridge",
            "bridge": "cni0",
            "isGateway": true,
            "ipMasq": true,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": pod_cidr}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": dir.join("cni-ipam").display().to_string(),
            },
        }],
    })
    .to_string()
}

/// The processes whose command line contains `needle` (a path only we use).
pub(crate) fn pids_whose_command_line_has(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let own = std::process::id();
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
        .collect()
}

/// Unmounts every mount point under `dir`, deepest first.
pub(crate) fn unmount_under(dir: &Path) {
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<&str> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|point| Path::new(point).starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for point in points {
        if Command::new("umount")
            .arg(point)
            .output()
            .map_or(true, |o| !o.status.success())
        {
            let _ = Command::new("umount").arg("-l").arg(point).output();
        }
    }
}
