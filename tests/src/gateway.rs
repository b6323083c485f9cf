//! The `edgegate` binary as a child process, pointed at a [`Cluster`].

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::cluster::{ADMIN_TOKEN, Cluster, User, kubectl};
use crate::http;
use crate::process::{Process, free_port, unique, wait_until};
use crate::toolchain::Toolchain;

/// A running gateway and the kubeconfigs that reach the cluster through it.
#[derive(Debug)]
pub struct Gateway {
    process: Option<Process>,
    bin: PathBuf,
    args: Vec<String>,
    netns: Option<PathBuf>,
    /// The proxy address.
    pub proxy: SocketAddr,
    /// The hub server address.
    pub hub: SocketAddr,
    /// The gateway's scratch directory (cache, logs, kubeconfigs).
    pub dir: PathBuf,
    /// Kubeconfig of the admin user through the gateway (the request carries its token).
    pub admin_kubeconfig: PathBuf,
    /// Kubeconfig without credentials through the gateway (the gateway's identity is used).
    pub anonymous_kubeconfig: PathBuf,
    tools: Toolchain,
}

impl Gateway {
    /// Starts `bin` against `cluster` with the harness defaults plus `extra` flags, and
    /// waits until its hub server answers.
    pub fn start(bin: &Path, cluster: &Cluster, extra: &[&str]) -> Result<Gateway> {
        Gateway::start_to(bin, cluster, &cluster.url(), extra)
    }

    /// [`Gateway::start`] with `server` as its apiserver URL (e.g. a [`crate::Relay`] in front
    /// of the cluster).
    pub fn start_to(
        bin: &Path,
        cluster: &Cluster,
        server: &str,
        extra: &[&str],
    ) -> Result<Gateway> {
        Gateway::launch(
            bin,
            cluster,
            server,
            Some(&cluster.gateway_kubeconfig),
            extra,
            None,
        )
    }

    /// [`Gateway::start`] with `kubeconfig` as the gateway's own identity.
    pub fn start_as(
        bin: &Path,
        cluster: &Cluster,
        kubeconfig: &Path,
        extra: &[&str],
    ) -> Result<Gateway> {
        Gateway::launch(bin, cluster, &cluster.url(), Some(kubeconfig), extra, None)
    }

    /// [`Gateway::start_as`] with `server` as its apiserver URL (e.g. a [`crate::Relay`]).
    pub fn start_as_to(
        bin: &Path,
        cluster: &Cluster,
        server: &str,
        kubeconfig: &Path,
        extra: &[&str],
    ) -> Result<Gateway> {
        Gateway::launch(bin, cluster, server, Some(kubeconfig), extra, None)
    }

    /// [`Gateway::start_as_to`] in the network namespace `netns`, its proxy and hub server
    /// on `ip` there (which the harness must be able to reach, e.g. from the LAN of a
    /// [`crate::lan::Lan`]).
    pub fn start_as_in(
        bin: &Path,
        cluster: &Cluster,
        server: &str,
        kubeconfig: &Path,
        (netns, ip): (&Path, IpAddr),
        extra: &[&str],
    ) -> Result<Gateway> {
        let place = Some((netns, ip));
        Gateway::launch(bin, cluster, server, Some(kubeconfig), extra, place)
    }

    /// [`Gateway::start`] without a kubeconfig: `extra` gives it its identity (e.g. a
    /// bootstrap token for its certificate manager).
    pub fn start_without_kubeconfig(
        bin: &Path,
        cluster: &Cluster,
        extra: &[&str],
    ) -> Result<Gateway> {
        Gateway::launch(bin, cluster, &cluster.url(), None, extra, None)
    }

    fn launch(
        bin: &Path,
        cluster: &Cluster,
        server: &str,
        kubeconfig: Option<&Path>,
        extra: &[&str],
        place: Option<(&Path, IpAddr)>,
    ) -> Result<Gateway> {
        let dir = cluster.dir.join(unique("gateway"));
        let ip = place.map_or(IpAddr::from([127, 0, 0, 1]), |(_, ip)| ip);
        std::fs::create_dir_all(&dir)?;
        let (proxy_port, hub_port) = (free_port()?, free_port()?);
        let mut args = vec![
            format!("--server-addr={server}"),
            format!("--proxy-port={proxy_port}"),
            format!("--serve-port={hub_port}"),
            format!("--disk-cache-path={}", dir.join("cache").display()),
            "--log-level=info,edgegate=debug".to_owned(),
            // The harness's gateways share the host's network: none makes a hub interface
            // there (a test that wants one runs its gateway in a namespace of its own).
            "--enable-dummy-if=false".to_owned(),
        ];
        args.extend(kubeconfig.map(|k| format!("--kubeconfig={}", k.display())));
        if place.is_some() {
            args.push(format!("--bind-address={ip}"));
            args.push(format!("--bind-proxy-address={ip}"));
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let url = format!("http://{}", SocketAddr::new(ip, proxy_port));
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        cluster.kubeconfig_for(&admin_kubeconfig, &url, &User::Token(ADMIN_TOKEN))?;
        let anonymous_kubeconfig = dir.join("anonymous.kubeconfig");
        cluster.kubeconfig_for(&anonymous_kubeconfig, &url, &User::Anonymous)?;
        let mut gateway = Gateway {
            process: None,
            bin: bin.to_owned(),
            args,
            netns: place.map(|(netns, _)| netns.to_owned()),
            proxy: SocketAddr::new(ip, proxy_port),
            hub: SocketAddr::new(ip, hub_port),
            dir,
            admin_kubeconfig,
            anonymous_kubeconfig,
            tools: cluster.tools().clone(),
        };
        gateway.restart()?;
        Ok(gateway)
    }

    /// Starts the process again with the same flags and ports (after [`Gateway::kill`] or
    /// [`Gateway::stop`]), and waits until its hub server answers.
    pub fn restart(&mut self) -> Result<()> {
        self.spawn()?;
        let hub = self.hub;
        // A bound on a start that hangs, not a time the start must make: one that compiles
        // Python or JavaScript components took over 30 s on a loaded 2-core machine.
        let up = wait_until(Duration::from_secs(180), "edgegate /v1/healthz", || {
            http::get(hub, "/v1/healthz").is_ok_and(|r| r.status == 200)
        });
        if let Err(error) = up {
            let process = self
                .process
                .as_mut()
                .context("the gateway was just spawned")?;
            process.check_running()?;
            return Err(error.context(process.log_tail(30)));
        }
        Ok(())
    }

    /// Starts the process again with the same flags and ports, without waiting for it: to
    /// kill it at a moment of its start.
    pub fn spawn(&mut self) -> Result<()> {
        self.kill();
        let log = self.dir.join("edgegate.log");
        self.process = Some(match &self.netns {
            None => Process::spawn("edgegate", &self.bin, &self.args, &log)?,
            Some(netns) => {
                let mut args = vec![
                    format!("--net={}", netns.display()),
                    "--".to_owned(),
                    self.bin.display().to_string(),
                ];
                args.extend(self.args.iter().cloned());
                Process::spawn("edgegate", Path::new("nsenter"), &args, &log)?
            }
        });
        Ok(())
    }

    /// The proxy's URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.proxy)
    }

    /// Runs kubectl through the gateway as admin; returns stdout.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        kubectl(&self.tools, &self.admin_kubeconfig, args)
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// SIGTERM, SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        if let Some(mut process) = self.process.take() {
            process.terminate(grace);
        }
    }

    /// The process, while it runs.
    pub fn process(&mut self) -> Option<&mut Process> {
        self.process.as_mut()
    }

    /// The last lines of the gateway's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("edgegate.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}
