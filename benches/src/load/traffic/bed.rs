//! The node workload of `traffic` and `soak`: the test bed of `tests/node` with the cloud's
//! Services and EndpointSlices, the node's components started again for a [`Mode`] with the
//! simulated agents beside them, and the churn.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use edgegate_testkit::cluster::User;
use edgegate_testkit::netns::LinkKind;
use edgegate_testkit::node::{GATEWAY_URL, GatewayCommand};
use edgegate_testkit::process::Process;
use edgegate_testkit::{ADMIN_TOKEN, Testbed, Toolchain};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use super::Mode;
use crate::load::churn;
use crate::load::kube::Client;

/// The test bed with its workload.
pub struct NodeLoad {
    /// The cloud and the node.
    pub bed: Testbed,
    /// The runtime of the admin client and the churn.
    pub rt: Runtime,
    /// The cloud's admin client.
    pub admin: Arc<Client>,
    mode: Mode,
    /// Where the agents send their requests: the server, a CA and a token.
    target: (String, Option<PathBuf>, Option<String>),
    agents: Option<Process>,
    agents_log: PathBuf,
}

/// The churn, running until [`Churn::finish`].
pub struct Churn {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Result<u64>>,
}

impl Churn {
    /// Whether it stopped by itself (a failed update).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops it: the updates it made.
    pub fn finish(self, rt: &Runtime) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        rt.block_on(self.task)?
    }
}

impl NodeLoad {
    /// Brings up the cloud and the node behind `edgegate` across `link`, creates `services`
    /// Services and as many EndpointSlices, and stops the node's components (kube-proxy,
    /// kubelet, the gateway): the cloud then serves only its own controllers.
    pub fn prepare(
        tools: &Toolchain,
        edgegate: &Path,
        services: usize,
        mode: Mode,
        link: &LinkKind,
        say: &dyn Fn(&str),
    ) -> Result<Self> {
        say("starting the cloud and the node…");
        let gateway = GatewayCommand {
            program: edgegate.to_owned(),
            args: Vec::new(),
        };
        let mut bed = Testbed::start_as(tools, gateway, link)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let cluster = &bed.cloud.cluster;
        let admin = Arc::new(Client::new(
            &cluster.url(),
            Some(&cluster.pki.ca_cert),
            Some(ADMIN_TOKEN.to_owned()),
            "edgegate-load/traffic",
        )?);
        say(&format!("{services} Services and EndpointSlices…"));
        rt.block_on(churn::populate(&admin, services))?;

        // The node's components stop; in direct mode they come back on the cloud's address
        // with the node's own certificate.
        bed.node.kill_kube_proxy();
        bed.node.kill_kubelet();
        bed.node.kill_gateway();
        let cluster = &bed.cloud.cluster;
        let target = match mode {
            Mode::Filed | Mode::Edgegate | Mode::Multiplexer => {
                (GATEWAY_URL.to_owned(), None, None)
            }
            Mode::Direct => {
                let (cert, key) = cluster.pki.node.clone().context("no node certificate")?;
                let kubeconfig = bed.node.dir.join("components.kubeconfig");
                cluster.kubeconfig_for(
                    &kubeconfig,
                    &cluster.url(),
                    &User::Certificate(&cert, &key),
                )?;
                let ca = cluster.pki.ca_cert.clone();
                (cluster.url(), Some(ca), Some(ADMIN_TOKEN.to_owned()))
            }
        };
        let agents_log = bed.node.dir.join("agents.log");
        Ok(Self {
            bed,
            rt,
            admin,
            mode,
            target,
            agents: None,
            agents_log,
        })
    }

    /// Starts the node's components again (through the gateway, the gateway first, with the
    /// mode's flags and then `gateway_flags` after its own; [`Mode::Filed`] runs `filed`),
    /// then the agents in the node's namespace. Every gateway starts with an empty cache,
    /// as the clients of direct mode have nothing: what the gateway that ran while the
    /// objects were made cached of them (as much as it had seen when it was stopped) would
    /// otherwise spare one mode lists and cost it the rest as watch events.
    pub fn start(&mut self, gateway_flags: &[String], filed: Option<&Path>) -> Result<()> {
        let node = &mut self.bed.node;
        if self.mode == Mode::Filed {
            let program = filed.context("--mode filed needs --filed-edgegate")?;
            let flags: Vec<&str> = gateway_flags.iter().map(String::as_str).collect();
            let command = GatewayCommand {
                program: program.to_owned(),
                args: Vec::new(),
            };
            node.replace_gateway(command, &flags)?;
            node.start_gateway()?;
        } else if self.mode != Mode::Direct {
            let flags: Vec<&str> = (self.mode.gateway_flags().iter().copied())
                .chain(gateway_flags.iter().map(String::as_str))
                .collect();
            node.set_gateway_flags(&flags);
            node.clear_gateway_cache()?;
            node.start_gateway()?;
        }
        node.start_kubelet()?;
        node.start_kube_proxy()?;
        let (server, ca, token) = &self.target;
        let mut args = vec![
            format!("--net={}", self.bed.link.path().display()),
            "--".to_owned(),
            std::env::current_exe()?.display().to_string(),
            "traffic-agents".to_owned(),
            format!("--server={server}"),
        ];
        args.extend(ca.as_ref().map(|ca| format!("--ca={}", ca.display())));
        args.extend(token.as_ref().map(|token| format!("--token={token}")));
        self.agents = Some(Process::spawn(
            "agents",
            "nsenter".as_ref(),
            &args,
            &self.agents_log,
        )?);
        Ok(())
    }

    /// The cloud's apiserver's process id.
    pub fn apiserver_pid(&self) -> Result<u32> {
        self.bed
            .cloud
            .cluster
            .apiserver_pid()
            .context("the apiserver is not running")
    }

    /// The bytes of the edge link so far (its host end's counters): node → cloud, cloud →
    /// node.
    pub fn link_bytes(&self) -> Result<(u64, u64)> {
        let link = &self.bed.link.host_if;
        let stat = |name: &str| -> Result<u64> {
            let path = format!("/sys/class/net/{link}/statistics/{name}");
            Ok(std::fs::read_to_string(path)?.trim().parse()?)
        };
        Ok((stat("rx_bytes")?, stat("tx_bytes")?))
    }

    /// Fails with a log's tail if a node component or the agents stopped.
    pub fn check_running(&mut self) -> Result<()> {
        self.bed.node.check_running()?;
        if let Some(agents) = &mut self.agents {
            agents.check_running()?;
        }
        Ok(())
    }

    /// Starts the churn: `per_second` updates a second over the first `services` objects.
    pub fn churn(&self, services: usize, per_second: u32) -> Churn {
        let stop = Arc::new(AtomicBool::new(false));
        let (admin, flag) = (self.admin.clone(), stop.clone());
        let task = self
            .rt
            .spawn(async move { churn::churn(&admin, services, per_second, flag).await });
        Churn { stop, task }
    }

    /// The agents' last counters line (`lists=… relists=… …`), printed every 10 s.
    pub fn agents_counters(&self) -> String {
        let log = std::fs::read_to_string(&self.agents_log).unwrap_or_default();
        log.lines()
            .rfind(|l| l.starts_with("agents: "))
            .unwrap_or("agents: no counters")
            .trim_start_matches("agents: ")
            .to_owned()
    }

    /// Stops the agents.
    pub fn stop_agents(&mut self) {
        if let Some(mut agents) = self.agents.take() {
            agents.kill();
        }
    }
}
