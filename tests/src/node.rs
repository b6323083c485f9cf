//! A real edge node in a network namespace: containerd, edgegate, kubelet and kube-proxy
//! 1.20.2, the components pointed at edgegate (`http://127.0.0.1:10261` inside the node),
//! edgegate at the cloud across the [`Link`] on the node's identity (`system:node:<name>`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::cloud::Cloud;
use crate::cluster::User;
use crate::containerd::{Containerd, unmount_under};
use crate::netns::Link;
use crate::process::{Process, wait_until};
use crate::toolchain::Toolchain;

/// The gateway's cache directory (`--disk-cache-path`), in the node's directory.
const CACHE_DIR: &str = "edgegate-cache";

mod rules;

/// The gateway's proxy inside the node, where kubelet and kube-proxy are pointed.
pub const GATEWAY_URL: &str = "http://127.0.0.1:10261";

/// The resources the node's gateway shares between its clients (`--pool-scope-resources`):
/// YurtHub's, with EndpointSlices at `v1beta1`, the version this 1.20 cluster serves and its
/// kube-proxy reads. A scenario's own `--pool-scope-resources` flag replaces it.
pub const POOL_SCOPE_RESOURCES: &str = "/v1/services,discovery.k8s.io/v1beta1/endpointslices";

/// How to run edgegate: a program and the arguments before the gateway's own flags.
#[derive(Clone, Debug)]
pub struct GatewayCommand {
    /// The program (the `edgegate` binary, or a program that runs the gateway in-process).
    pub program: PathBuf,
    /// Arguments before the gateway's flags.
    pub args: Vec<String>,
}

/// Global kernel settings kubelet changes (`setupKernelTunables`), restored when the node goes.
const KERNEL_TUNABLES: &[&str] = &[
    "/proc/sys/vm/overcommit_memory",
    "/proc/sys/kernel/panic",
    "/proc/sys/kernel/panic_on_oops",
];

/// Where a node saves [`KERNEL_TUNABLES`] as they were (`path=value` lines), for a sweep
/// after a harness that could not put them back.
pub(crate) const KERNEL_TUNABLES_FILE: &str = "kernel-tunables";

/// The node's processes and files.
#[derive(Debug)]
pub struct Node {
    /// The node's name (and kubelet's hostname override).
    pub name: String,
    /// Its directory: kubelet's root, containerd's, the gateway's cache and filters, logs.
    pub dir: PathBuf,
    /// The container runtime.
    pub containerd: Containerd,
    netns: PathBuf,
    node_ip: String,
    pod_cidr: String,
    tools: Toolchain,
    gateway_command: GatewayCommand,
    gateway_args: Vec<String>,
    gateway_flags: Vec<String>,
    /// Whether the gateway is told the cluster's pool-scope resources when its flags do not.
    pool_scope_default: bool,
    gateway: Option<Process>,
    /// kubelet's static pod directory (`--pod-manifest-path`), once edgegate runs there.
    static_pods: Option<PathBuf>,
    kubelet: Option<Process>,
    kube_proxy: Option<Process>,
    tunables: Vec<(&'static str, String)>,
    pod_logs_before: Vec<PathBuf>,
}

impl Node {
    /// Starts containerd, edgegate (with the built filters `filters`), kubelet and kube-proxy
    /// in `link`'s namespace, and waits until the node is Ready in the cloud.
    pub fn start(
        tools: &Toolchain,
        link: &Link,
        cloud: &Cloud,
        name: &str,
        gateway: GatewayCommand,
        filters: &[&str],
    ) -> Result<Node> {
        tools.check_node()?;
        let dir = cloud.cluster.dir.join(format!("node-{name}"));
        std::fs::create_dir_all(&dir)?;
        let filter_dir = dir.join("filters");
        std::fs::create_dir_all(&filter_dir)?;
        if !filters.is_empty() {
            let built = crate::filters::built(filters)?;
            for filter in filters {
                let file = format!("{filter}.wasm");
                std::fs::copy(built.join(&file), filter_dir.join(&file))?;
            }
        }
        let (cluster, pki) = (&cloud.cluster, &cloud.cluster.pki);
        let node_pair = pki.node.clone();
        let (cert, key) = node_pair.context("the cloud has no certificate for the node")?;
        let gateway_kubeconfig = dir.join("edgegate.kubeconfig");
        cluster.kubeconfig_for(
            &gateway_kubeconfig,
            &cluster.url(),
            &User::Certificate(&cert, &key),
        )?;
        let components_kubeconfig = dir.join("components.kubeconfig");
        cluster.kubeconfig_for(&components_kubeconfig, GATEWAY_URL, &User::Anonymous)?;
        let gateway_args = vec![
            format!("--server-addr={}", cluster.url()),
            format!("--kubeconfig={}", gateway_kubeconfig.display()),
            format!("--node-name={name}"),
            format!("--disk-cache-path={}", dir.join(CACHE_DIR).display()),
            format!("--filter-dir={}", filter_dir.display()),
            // The HTTPS proxy masterservice points the node's pods at, on the hub interface.
            format!("--tls-cert-file={}", pki.gateway_serving_cert.display()),
            format!(
                "--tls-private-key-file={}",
                pki.gateway_serving_key.display()
            ),
            "--log-level=info,edgegate=debug".to_owned(),
        ];
        let tunables: Vec<(&str, String)> = KERNEL_TUNABLES
            .iter()
            .filter_map(|path| Some((*path, std::fs::read_to_string(path).ok()?)))
            .collect();
        let saved: String = tunables
            .iter()
            .map(|(path, value)| format!("{path}={}\n", value.trim()))
            .collect();
        std::fs::write(dir.join(KERNEL_TUNABLES_FILE), saved)?;
        let containerd = Containerd::start(link, &dir.join("containerd"))?;
        let mut node = Node {
            name: name.to_owned(),
            dir,
            containerd,
            netns: link.path(),
            node_ip: link.node_ip().to_string(),
            pod_cidr: link.pod_cidr(),
            tools: tools.clone(),
            gateway_command: gateway,
            gateway_args,
            gateway_flags: Vec::new(),
            pool_scope_default: true,
            gateway: None,
            static_pods: None,
            kubelet: None,
            kube_proxy: None,
            tunables,
            pod_logs_before: pod_log_dirs(),
        };
        node.start_gateway()?;
        node.start_kubelet()?;
        node.start_kube_proxy()?;
        node.wait_ready(cloud)?;
        Ok(node)
    }

    /// Starts edgegate and waits until its hub answers `/v1/healthz`.
    pub fn start_gateway(&mut self) -> Result<()> {
        let mut args = self.gateway_command.args.clone();
        args.extend(self.gateway_args.iter().cloned());
        // The cluster's EndpointSlices, which its kube-proxy asks for, shared with Services,
        // unless the scenario's flags say which.
        if self.pool_scope_default
            && !self
                .gateway_flags
                .iter()
                .any(|f| f.starts_with("--pool-scope-resources"))
        {
            args.push(format!("--pool-scope-resources={POOL_SCOPE_RESOURCES}"));
        }
        args.extend(self.gateway_flags.iter().cloned());
        let program = self.gateway_command.program.clone();
        let mut process = self.spawn("edgegate", &program, &args)?;
        let up = wait_until(Duration::from_secs(300), "edgegate /v1/healthz", || {
            self.hub("/v1/healthz")
                .is_ok_and(|(status, _)| status == 200)
        });
        if let Err(error) = up {
            process.check_running()?;
            return Err(error.context(process.log_tail(30)));
        }
        self.gateway = Some(process);
        Ok(())
    }

    /// Starts kubelet (its log appends to `kubelet.log`).
    pub fn start_kubelet(&mut self) -> Result<()> {
        let dir = self.dir.display().to_string();
        let socket = format!("unix://{}", self.containerd.socket.display());
        let args = vec![
            format!("--kubeconfig={dir}/components.kubeconfig"),
            "--container-runtime=remote".to_owned(),
            format!("--container-runtime-endpoint={socket}"),
            // cAdvisor's view of containers, else it looks for /run/containerd's.
            format!("--containerd={}", self.containerd.socket.display()),
            format!("--root-dir={dir}/kubelet"),
            format!("--cert-dir={dir}/kubelet/pki"),
            format!("--volume-plugin-dir={dir}/kubelet/volume-plugins"),
            format!("--hostname-override={}", self.name),
            format!("--node-ip={}", self.node_ip),
            // What runs on these machines (verified): no QoS cgroups, nothing enforced.
            "--cgroup-driver=cgroupfs".to_owned(),
            "--cgroups-per-qos=false".to_owned(),
            "--enforce-node-allocatable=".to_owned(),
            "--fail-swap-on=false".to_owned(),
            // Lowering oom_score_adj is refused here.
            "--oom-score-adj=0".to_owned(),
            "--read-only-port=0".to_owned(),
            // The only image must never be collected.
            "--image-gc-high-threshold=100".to_owned(),
            "--image-gc-low-threshold=99".to_owned(),
            // The host's disk is the builds' too: how full it is must not decide whether
            // pods are admitted (the default evicts under 15 % free), memory still does.
            "--eviction-hard=memory.available<100Mi".to_owned(),
            // Each pod's resync (a minute by default) is when an edited ConfigMap reaches its
            // volume and a pod deleted in the cloud is deleted there: the same, sooner.
            "--sync-frequency=10s".to_owned(),
            "--logtostderr=true".to_owned(),
            "--v=2".to_owned(),
        ];
        let mut args = args;
        args.extend(
            self.static_pods
                .as_ref()
                .map(|dir| format!("--pod-manifest-path={}", dir.display())),
        );
        let kubelet = self.tools.kubelet.clone();
        self.kubelet = Some(self.spawn("kubelet", &kubelet, &args)?);
        Ok(())
    }

    /// Hands edgegate to kubelet, as a node deployed like YurtHub runs it: the gateway
    /// process stopped, `manifest` written into kubelet's static pod directory, kubelet
    /// restarted with it; waits until the pod's gateway answers `/v1/healthz` (its image
    /// must be in containerd).
    pub fn run_gateway_as_static_pod(&mut self, manifest: &str) -> Result<()> {
        self.stop_gateway();
        self.kill_kubelet();
        let dir = self.dir.join("manifests");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("edgegate.yaml"), manifest)?;
        self.static_pods = Some(dir);
        self.start_kubelet()?;
        let up = wait_until(Duration::from_secs(180), "edgegate's static pod", || {
            self.hub("/v1/healthz")
                .is_ok_and(|(status, _)| status == 200)
        });
        if let Err(error) = up {
            self.check_running()?;
            let kubelet = self.log("kubelet");
            let about: Vec<&str> = kubelet.lines().filter(|l| l.contains("edgegate")).collect();
            let pod_log = std::fs::read_dir("/var/log/pods")
                .into_iter()
                .flatten()
                .flatten()
                .find(|d| d.file_name().to_string_lossy().contains("_edgegate-"))
                .and_then(|d| std::fs::read_to_string(d.path().join("edgegate/0.log")).ok())
                .unwrap_or_default();
            let tail: Vec<&str> = pod_log.lines().rev().take(30).collect();
            return Err(error.context(format!(
                "kubelet on edgegate:\n{}\nthe pod's log (last lines first):\n{}",
                about[about.len().saturating_sub(20)..].join("\n"),
                tail.join("\n")
            )));
        }
        Ok(())
    }

    /// Stops kubelet (SIGKILL: a crash, or a node losing power).
    pub fn kill_kubelet(&mut self) {
        if let Some(mut process) = self.kubelet.take() {
            process.kill();
        }
    }

    /// Starts kube-proxy in iptables mode (its log appends to `kube-proxy.log`).
    pub fn start_kube_proxy(&mut self) -> Result<()> {
        let args = vec![
            format!("--kubeconfig={}/components.kubeconfig", self.dir.display()),
            format!("--hostname-override={}", self.name),
            "--proxy-mode=iptables".to_owned(),
            format!("--cluster-cidr={}", self.pod_cidr),
            // No sysctl writes outside the namespace: conntrack's table is the host's.
            "--conntrack-max-per-core=0".to_owned(),
            "--conntrack-tcp-timeout-established=0".to_owned(),
            "--conntrack-tcp-timeout-close-wait=0".to_owned(),
            "--oom-score-adj=0".to_owned(),
            "--metrics-bind-address=127.0.0.1:10249".to_owned(),
            "--healthz-bind-address=127.0.0.1:10256".to_owned(),
            "--logtostderr=true".to_owned(),
            "--v=2".to_owned(),
        ];
        let kube_proxy = self.tools.kube_proxy.clone();
        self.kube_proxy = Some(self.spawn("kube-proxy", &kube_proxy, &args)?);
        Ok(())
    }

    /// Stops kube-proxy (SIGKILL).
    pub fn kill_kube_proxy(&mut self) {
        if let Some(mut process) = self.kube_proxy.take() {
            process.kill();
        }
    }

    /// Stops edgegate (SIGKILL).
    pub fn kill_gateway(&mut self) {
        if let Some(mut process) = self.gateway.take() {
            process.kill();
        }
    }

    /// The process id of a running component (`edgegate`, `kubelet`, `kube-proxy`).
    pub fn pid(&self, component: &str) -> Option<u32> {
        let process = match component {
            "edgegate" => &self.gateway,
            "kubelet" => &self.kubelet,
            "kube-proxy" => &self.kube_proxy,
            _ => return None,
        };
        process.as_ref().map(Process::pid)
    }

    /// Stops edgegate with SIGTERM: a clean shutdown, which records its running time.
    pub fn stop_gateway(&mut self) {
        if let Some(mut process) = self.gateway.take() {
            process.terminate(Duration::from_secs(30));
        }
    }

    /// Sets edgegate's flags after the node's own (e.g. `--cache-gc-after=30s`), from its
    /// next start.
    pub fn set_gateway_flags(&mut self, flags: &[&str]) {
        self.gateway_flags = flags.iter().map(|f| (*f).to_owned()).collect();
    }

    /// Runs another build of edgegate from its next start (which must be stopped now), with
    /// the node's own flags and `flags` only and an empty cache: a build older than
    /// `--pool-scope-resources`, as a benchmark's baseline.
    pub fn replace_gateway(&mut self, command: GatewayCommand, flags: &[&str]) -> Result<()> {
        self.clear_gateway_cache()?;
        self.gateway_command = command;
        self.set_gateway_flags(flags);
        self.pool_scope_default = false;
        Ok(())
    }

    /// Empties the cache of the gateway, which must be stopped: its next start is a first
    /// one.
    pub fn clear_gateway_cache(&mut self) -> Result<()> {
        anyhow::ensure!(self.gateway.is_none(), "edgegate is running");
        let cache = self.dir.join(CACHE_DIR);
        if cache.exists() {
            std::fs::remove_dir_all(&cache)?;
        }
        Ok(())
    }

    /// Powers the node off: edgegate, kubelet and kube-proxy killed, containerd with its
    /// shims and containers, what they mounted unmounted, and kube-proxy's chains gone (a
    /// reboot loses iptables). The node's disk (caches, kubelet's and containerd's state)
    /// stays.
    pub fn power_off(&mut self) -> Result<()> {
        self.kill_kube_proxy();
        self.kill_kubelet();
        self.kill_gateway();
        self.containerd.clean();
        unmount_under(&self.dir);
        self.flush_proxy_rules()
    }

    /// Powers the node on after [`Node::power_off`]: containerd, edgegate, kubelet and
    /// kube-proxy, without waiting for the cloud.
    pub fn power_on(&mut self) -> Result<()> {
        self.containerd.restart()?;
        self.start_gateway()?;
        self.start_kubelet()?;
        self.start_kube_proxy()
    }

    /// Fails with its log's tail if a component that should run has exited.
    pub fn check_running(&mut self) -> Result<()> {
        for process in [&mut self.gateway, &mut self.kubelet, &mut self.kube_proxy]
            .into_iter()
            .flatten()
        {
            process.check_running()?;
        }
        Ok(())
    }

    /// Waits until the node is Ready in the cloud.
    pub fn wait_ready(&mut self, cloud: &Cloud) -> Result<()> {
        let condition = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}";
        let ready = wait_until(Duration::from_secs(120), "the node to be Ready", || {
            cloud
                .kubectl(&["get", "node", &self.name, "-o", condition])
                .is_ok_and(|s| s.trim() == "True")
        });
        if let Err(error) = ready {
            self.check_running()?;
            return Err(error.context(self.log_tail("kubelet", 30)));
        }
        Ok(())
    }

    /// `GET path` on the gateway's hub inside the node: status and body.
    pub fn hub(&self, path: &str) -> Result<(u16, String)> {
        let url = format!("http://127.0.0.1:10267{path}");
        let out = self.run("curl", &["-s", "-m", "5", "-w", "\n%{http_code}", &url])?;
        let (body, status) = out.rsplit_once('\n').context("curl printed no status")?;
        Ok((status.trim().parse()?, body.to_owned()))
    }

    /// Runs `program args` inside the node's network namespace; its stdout.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String> {
        crate::netns::run(self.command(program).args(args))
    }

    /// A command that runs `program` inside the node's network namespace.
    pub fn command(&self, program: &str) -> std::process::Command {
        let mut command = std::process::Command::new("nsenter");
        command
            .arg(format!("--net={}", self.netns.display()))
            .arg("--")
            .arg(program);
        command
    }

    /// A component's log (`edgegate`, `kubelet`, `kube-proxy`) so far, all its runs.
    pub fn log(&self, component: &str) -> String {
        let bytes = std::fs::read(self.dir.join(format!("{component}.log"))).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The last `lines` lines of a component's log.
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        let log = self.log(component);
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn spawn(&self, name: &str, program: &Path, args: &[String]) -> Result<Process> {
        let mut full = vec![
            format!("--net={}", self.netns.display()),
            "--".to_owned(),
            program.display().to_string(),
        ];
        full.extend(args.iter().cloned());
        Process::spawn(
            name,
            Path::new("nsenter"),
            &full,
            &self.dir.join(format!("{name}.log")),
        )
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill_kube_proxy();
        self.kill_kubelet();
        self.kill_gateway();
        self.containerd.clean();
        unmount_under(&self.dir);
        remove_pod_logs(&self.dir.join("kubelet/pods"), &self.pod_logs_before);
        for (path, value) in &self.tunables {
            let _ = std::fs::write(path, value);
        }
    }
}

/// Removes the logs kubelet wrote to `/var/log/pods` (whatever its root) for the pods under
/// `kubelet_pods` (its `pods` directory), but none of `keep`, and the links to them in
/// `/var/log/containers`.
pub(crate) fn remove_pod_logs(kubelet_pods: &Path, keep: &[PathBuf]) {
    let ours: Vec<String> = std::fs::read_dir(kubelet_pods)
        .map(|d| {
            d.filter_map(|e| Some(format!("_{}", e.ok()?.file_name().to_str()?)))
                .collect()
        })
        .unwrap_or_default();
    let mut removed = Vec::new();
    for dir in pod_log_dirs() {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if !keep.contains(&dir) && ours.iter().any(|uid| name.ends_with(uid)) {
            let _ = std::fs::remove_dir_all(&dir);
            removed.push(dir);
        }
    }
    for entry in std::fs::read_dir("/var/log/containers")
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = entry.path();
        if std::fs::read_link(&path).is_ok_and(|to| removed.iter().any(|d| to.starts_with(d))) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Writes back kernel settings saved in [`KERNEL_TUNABLES_FILE`]'s format; only the
/// settings of [`KERNEL_TUNABLES`].
pub(crate) fn restore_kernel_tunables(saved: &str) {
    for (path, value) in saved.lines().filter_map(|line| line.split_once('=')) {
        if KERNEL_TUNABLES.contains(&path) {
            let _ = std::fs::write(path, value);
        }
    }
}

fn pod_log_dirs() -> Vec<PathBuf> {
    std::fs::read_dir("/var/log/pods")
        .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default()
}
