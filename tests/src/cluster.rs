//! A real Kubernetes control plane on loopback: etcd and kube-apiserver, their kubeconfigs,
//! and kubectl pointed at them.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::pki::Pki;
use crate::process::{Process, free_port, wait_until};
use crate::toolchain::Toolchain;

/// The bearer token of the admin user (`system:masters`).
pub const ADMIN_TOKEN: &str = "edgegate-e2e-admin-token";
/// The bearer token of a user with no RBAC grants, to tell identities apart.
pub const NOBODY_TOKEN: &str = "edgegate-e2e-nobody-token";

/// How long kube-apiserver may take to become ready (about 15 s on two cores).
const APISERVER_READY_TIMEOUT: Duration = Duration::from_secs(120);

static SEQUENCE: AtomicUsize = AtomicUsize::new(0);

/// A fresh scratch directory under the system temp dir, removed by its owner.
pub(crate) fn scratch_dir(kind: &str) -> Result<PathBuf> {
    crate::sweep::sweep_once();
    let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "{}{}-{kind}-{n}",
        crate::sweep::SCRATCH_PREFIX,
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// An etcd member on loopback, with its data on tmpfs when there is one.
#[derive(Debug)]
pub struct Etcd {
    process: Mutex<Process>,
    /// The client URL.
    pub url: String,
    /// Its scratch directory (its log), removed on drop.
    dir: PathBuf,
    /// Its data, on tmpfs apart from `dir` when there is one; removed on drop.
    data: PathBuf,
}

impl Etcd {
    /// Starts etcd on free ports and waits until it answers.
    pub fn start(tools: &Toolchain) -> Result<Etcd> {
        let dir = scratch_dir("etcd")?;
        let shm = Path::new("/dev/shm");
        let data = if shm.is_dir() {
            shm.join(dir.file_name().context("scratch dir has a name")?)
        } else {
            dir.join("data")
        };
        let (client, peer) = (free_port()?, free_port()?);
        let url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let args = [
            "--name=e2e".to_owned(),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls={url}"),
            format!("--advertise-client-urls={url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=e2e={peer_url}"),
            "--log-level=warn".to_owned(),
            "--logger=zap".to_owned(),
            "--quota-backend-bytes=4294967296".to_owned(),
        ];
        let mut process = Process::spawn("etcd", &tools.etcd, &args, &dir.join("etcd.log"))?;
        wait_until(Duration::from_secs(30), "etcd", || {
            std::net::TcpStream::connect(("127.0.0.1", client)).is_ok()
        })
        .or_else(|e| process.check_running().and(Err(e)))?;
        Ok(Etcd {
            process: Mutex::new(process),
            url,
            dir,
            data,
        })
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Ok(mut p) = self.process.lock() {
            p.kill();
        }
        let _ = std::fs::remove_dir_all(&self.data);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How a [`Cluster`]'s apiserver is set up; the default is the e2e suite's loopback cluster.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// The address the apiserver binds and advertises (its certificate is valid for it).
    pub address: IpAddr,
    /// `--service-cluster-ip-range`.
    pub service_cidr: String,
    /// A node whose client certificate is issued ([`Pki::node`]); the apiserver then
    /// authorizes with the Node authorizer before RBAC, as a real cluster does.
    pub node: Option<String>,
    /// Whether a kube-controller-manager will run: then the ServiceAccount admission plugin
    /// stays on (the controllers create the accounts it requires).
    pub controller_manager: bool,
    /// Bootstrap tokens authenticate (`--enable-bootstrap-token-auth`), as in a kubeadm
    /// cluster that nodes join with a token ([`crate::bootstrap`]).
    pub bootstrap_token_auth: bool,
}

impl Default for ClusterOptions {
    fn default() -> ClusterOptions {
        ClusterOptions {
            address: IpAddr::from([127, 0, 0, 1]),
            service_cidr: "10.96.0.0/16".to_owned(),
            node: None,
            controller_manager: false,
            bootstrap_token_auth: false,
        }
    }
}

/// A kube-apiserver on a free port, backed by its own prefix of an [`Etcd`].
#[derive(Debug)]
pub struct Cluster {
    /// The scratch directory: PKI, kubeconfigs, logs.
    pub dir: PathBuf,
    /// The PKI the apiserver runs with.
    pub pki: Pki,
    /// The secure port.
    pub port: u16,
    /// How the apiserver is set up.
    pub options: ClusterOptions,
    /// Kubeconfig of the admin user (bearer token), talking to the apiserver directly.
    pub admin_kubeconfig: PathBuf,
    /// Kubeconfig for the gateway: client certificate CN `edgegate`, group `system:masters`.
    pub gateway_kubeconfig: PathBuf,
    tools: Toolchain,
    etcd: Arc<Etcd>,
    prefix: String,
    apiserver: Mutex<Option<Process>>,
}

impl Cluster {
    /// Starts a kube-apiserver on `etcd` and waits until it is ready.
    pub fn start(tools: &Toolchain, etcd: Arc<Etcd>) -> Result<Cluster> {
        Cluster::start_with(tools, etcd, ClusterOptions::default())
    }

    /// [`Cluster::start`] set up by `options`.
    pub fn start_with(
        tools: &Toolchain,
        etcd: Arc<Etcd>,
        options: ClusterOptions,
    ) -> Result<Cluster> {
        let dir = scratch_dir("cluster")?;
        let pki = Pki::generate_for(
            &dir.join("pki"),
            &[options.address.to_string()],
            options.node.as_deref(),
        )?;
        std::fs::write(
            dir.join("tokens.csv"),
            format!(
                "{ADMIN_TOKEN},admin,admin-uid,\"system:masters\"\n{NOBODY_TOKEN},nobody,nobody-uid\n"
            ),
        )?;
        let port = free_port()?;
        let server = format!("https://{}:{port}", options.address);
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        write_kubeconfig(
            &admin_kubeconfig,
            &server,
            Some(&pki.ca_cert),
            &User::Token(ADMIN_TOKEN),
        )?;
        let gateway_kubeconfig = dir.join("gateway.kubeconfig");
        write_kubeconfig(
            &gateway_kubeconfig,
            &server,
            Some(&pki.ca_cert),
            &User::Certificate(&pki.gateway_cert, &pki.gateway_key),
        )?;
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let cluster = Cluster {
            prefix: format!("/registry-{}-{n}", std::process::id()),
            dir,
            pki,
            port,
            options,
            admin_kubeconfig,
            gateway_kubeconfig,
            tools: tools.clone(),
            etcd,
            apiserver: Mutex::new(None),
        };
        cluster.start_apiserver()?;
        Ok(cluster)
    }

    /// A second kube-apiserver of this cluster, as an HA control plane runs several: the same
    /// etcd storage, PKI and users, on a port of its own, with its own kubeconfigs and logs.
    /// Its PKI files are this cluster's: it must not outlive it.
    pub fn replica(&self) -> Result<Cluster> {
        let dir = scratch_dir("replica")?;
        std::fs::copy(self.dir.join("tokens.csv"), dir.join("tokens.csv"))?;
        let port = free_port()?;
        let server = format!("https://{}:{port}", self.options.address);
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        let ca = Some(self.pki.ca_cert.as_path());
        write_kubeconfig(&admin_kubeconfig, &server, ca, &User::Token(ADMIN_TOKEN))?;
        let gateway_kubeconfig = dir.join("gateway.kubeconfig");
        let gateway = User::Certificate(&self.pki.gateway_cert, &self.pki.gateway_key);
        write_kubeconfig(&gateway_kubeconfig, &server, ca, &gateway)?;
        let replica = Cluster {
            prefix: self.prefix.clone(),
            dir,
            pki: self.pki.clone(),
            port,
            options: self.options.clone(),
            admin_kubeconfig,
            gateway_kubeconfig,
            tools: self.tools.clone(),
            etcd: self.etcd.clone(),
            apiserver: Mutex::new(None),
        };
        replica.start_apiserver()?;
        Ok(replica)
    }

    /// The apiserver's URL.
    pub fn url(&self) -> String {
        format!("https://{}:{}", self.options.address, self.port)
    }

    /// The running kube-apiserver's process id (for its CPU time).
    pub fn apiserver_pid(&self) -> Option<u32> {
        let slot = self.apiserver.lock().ok()?;
        slot.as_ref().map(Process::pid)
    }

    /// The etcd the apiserver stores in.
    pub fn etcd(&self) -> &Arc<Etcd> {
        &self.etcd
    }

    /// The toolchain the cluster runs with.
    pub fn tools(&self) -> &Toolchain {
        &self.tools
    }

    /// Starts kube-apiserver (again) on the same port and storage, and waits until ready.
    pub fn start_apiserver(&self) -> Result<()> {
        let mut slot = self
            .apiserver
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        if slot.is_some() {
            bail!("kube-apiserver is already running");
        }
        let pki = &self.pki;
        let options = &self.options;
        let mut args = vec![
            format!("--etcd-servers={}", self.etcd.url),
            format!("--etcd-prefix={}", self.prefix),
            format!("--bind-address={}", options.address),
            format!("--advertise-address={}", options.address),
            format!("--secure-port={}", self.port),
            "--insecure-port=0".to_owned(),
            format!("--tls-cert-file={}", pki.serving_cert.display()),
            format!("--tls-private-key-file={}", pki.serving_key.display()),
            format!("--client-ca-file={}", pki.ca_cert.display()),
            format!("--service-account-key-file={}", pki.sa_pub.display()),
            format!(
                "--service-account-signing-key-file={}",
                pki.sa_key.display()
            ),
            "--service-account-issuer=https://kubernetes.default.svc".to_owned(),
            format!(
                "--token-auth-file={}",
                self.dir.join("tokens.csv").display()
            ),
            format!("--service-cluster-ip-range={}", options.service_cidr),
            "--profiling=false".to_owned(),
            "--logtostderr=true".to_owned(),
            "--v=1".to_owned(),
        ];
        if options.node.is_some() {
            args.extend([
                "--authorization-mode=Node,RBAC".to_owned(),
                "--enable-admission-plugins=NodeRestriction".to_owned(),
                // kubelet logs and exec: the node's address, not a name nobody resolves.
                "--kubelet-preferred-address-types=InternalIP".to_owned(),
                "--allow-privileged=true".to_owned(),
            ]);
        } else {
            args.push("--authorization-mode=RBAC".to_owned());
        }
        if options.bootstrap_token_auth {
            args.push("--enable-bootstrap-token-auth=true".to_owned());
        }
        if !options.controller_manager {
            // No controller-manager runs, so nothing would create service accounts for pods.
            args.push("--disable-admission-plugins=ServiceAccount".to_owned());
        }
        let mut process = Process::spawn(
            "kube-apiserver",
            &self.tools.kube_apiserver,
            &args,
            &self.dir.join("kube-apiserver.log"),
        )?;
        let ready = wait_until(APISERVER_READY_TIMEOUT, "kube-apiserver /readyz", || {
            process.is_running() && self.kubectl(&["get", "--raw", "/readyz"]).is_ok()
        });
        if let Err(error) = ready {
            process.check_running()?;
            return Err(error.context(process.log_tail(30)));
        }
        *slot = Some(process);
        Ok(())
    }

    /// Stops kube-apiserver (SIGTERM, then SIGKILL after 5 s) and waits until its port is closed.
    pub fn stop_apiserver(&self) -> Result<()> {
        if let Some(mut process) = self.take_apiserver()? {
            process.terminate(Duration::from_secs(5));
        }
        wait_until(
            Duration::from_secs(10),
            "the apiserver port to close",
            || std::net::TcpStream::connect((self.options.address, self.port)).is_err(),
        )
    }

    /// Kills kube-apiserver (SIGKILL: no graceful shutdown, its connections reset), as a
    /// machine that dies does.
    pub fn kill_apiserver(&self) -> Result<()> {
        if let Some(mut process) = self.take_apiserver()? {
            process.kill();
        }
        Ok(())
    }

    fn take_apiserver(&self) -> Result<Option<Process>> {
        let mut slot = self
            .apiserver
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        Ok(slot.take())
    }

    /// Runs kubectl against the apiserver directly, as admin; returns stdout.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        kubectl(&self.tools, &self.admin_kubeconfig, args)
    }

    /// `kubectl apply` of the manifest `json` (a file in the cluster's directory), as admin.
    pub fn apply(&self, json: &str) -> Result<()> {
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("manifest-{n}.json"));
        std::fs::write(&path, json)?;
        self.kubectl(&["apply", "-f", &path.display().to_string()])
            .map(drop)
    }

    /// Writes a kubeconfig for `server` (e.g. the gateway's URL) with `user`; the CA is
    /// included for https servers.
    pub fn kubeconfig_for(&self, path: &Path, server: &str, user: &User<'_>) -> Result<()> {
        let ca = server
            .starts_with("https")
            .then_some(self.pki.ca_cert.as_path());
        write_kubeconfig(path, server, ca, user)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.apiserver.lock()
            && let Some(mut process) = slot.take()
        {
            process.kill();
        }
        // After a panic its logs are kept for diagnosis; the next harness's sweep removes
        // them once this one is gone.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs kubectl with `kubeconfig`; returns stdout, or fails with stderr.
pub fn kubectl(tools: &Toolchain, kubeconfig: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new(&tools.kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .context("running kubectl")?;
    if !output.status.success() {
        bail!(
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// The user of a kubeconfig.
#[derive(Clone, Copy, Debug)]
pub enum User<'a> {
    /// A bearer token.
    Token(&'a str),
    /// A client certificate and key.
    Certificate(&'a Path, &'a Path),
    /// No credentials at all.
    Anonymous,
}

/// Writes a kubeconfig for `server` with `user`, trusting `ca` if given.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca: Option<&Path>,
    user: &User<'_>,
) -> Result<()> {
    let ca_line = match ca {
        Some(ca) => format!("    certificate-authority: {}\n", ca.display()),
        None => String::new(),
    };
    let user_lines = match user {
        User::Token(token) => format!("    token: {token}\n"),
        User::Certificate(cert, key) => format!(
            "    client-certificate: {}\n    client-key: {}\n",
            cert.display(),
            key.display()
        ),
        User::Anonymous => "    {}\n".to_owned(),
    };
    let user_block = if matches!(user, User::Anonymous) {
        "- name: e2e\n  user: {}\n".to_owned()
    } else {
        format!("- name: e2e\n  user:\n{user_lines}")
    };
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\n{ca_line}users:\n{user_block}contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: e2e\ncurrent-context: e2e\n"
    );
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
