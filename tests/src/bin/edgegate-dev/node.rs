//! `cargo dev --node`: the node test bed of `tests/node` (containerd, kubelet and kube-proxy
//! in a network namespace behind edgegate, the cloud across a veth), kept up for trying
//! things by hand. Commands on stdin cut and restore the link and restart components;
//! `--wan` makes the link a WAN (150 ms RTT, 1 % loss, 5 Mbit/s) instead of a veth.

use std::io::BufRead;
use std::process::ExitCode;
use std::sync::mpsc;

use anyhow::Result;
use clap::Parser;
use edgegate::cli::Cli;
use edgegate::config::Config;
use edgegate::server;
use edgegate_testkit::netns::LinkKind;
use edgegate_testkit::node::GatewayCommand;
use edgegate_testkit::wan::Wan;
use edgegate_testkit::{Testbed, Toolchain};

/// The hidden first argument that makes this program the node's gateway (run by the node,
/// inside its namespace): the gateway in-process, as `edgegate` would run it.
pub const GATEWAY: &str = "__gateway";

/// Runs the gateway with `args` (edgegate's flags) until SIGTERM, SIGINT or the parent dies.
pub fn gateway(args: Vec<String>) -> Result<ExitCode> {
    let cli = Cli::parse_from(std::iter::once("edgegate".to_owned()).chain(args));
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(cli.run.log_filter()))
        .init();
    tokio::runtime::Runtime::new()?.block_on(async {
        let config = Config::from_args(&cli.run)?;
        server::run(config, server::Hooks::default(), async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// This program as the node's gateway, `extra` flags after the node's own.
pub fn gateway_command(extra: Vec<String>) -> Result<GatewayCommand> {
    let mut args = vec![GATEWAY.to_owned()];
    args.extend(extra);
    Ok(GatewayCommand {
        program: std::env::current_exe()?,
        args,
    })
}

/// What `cargo dev --node --help` prints.
const USAGE: &str = "\
usage: cargo dev --node [--wan] [EDGEGATE FLAGS...]
       cargo dev --node --trials N [EDGEGATE FLAGS...]
       cargo dev --node --boot-trials N [EDGEGATE FLAGS...]

Brings up a real edge node (containerd, kubelet, kube-proxy 1.20.2 and edgegate in a network
namespace) and its cloud (etcd, kube-apiserver, kube-controller-manager), and follows commands
typed on stdin: cut | restore | restart kubelet | restart kube-proxy | restart edgegate | quit.

  --wan   join the node to the cloud over an emulated WAN (TUN devices and a forwarder in this
          process: 75 ms each way, 1 % loss, 5 Mbit/s, a 64 KiB queue) instead of a veth pair
  --trials N   instead, N times: cut the link, delete a pod and move a Service's endpoints in
          the cloud, restore, and time the pod stopped and kube-proxy's rules updated; prints
          each trial, p50 and max
  --boot-trials N   instead, N times: cut the link, power the node off and boot it still cut
          (a pod on the CNI bridge backs a Service, and comes back at a new address), restore,
          and time the ClusterIP answering from the pod running again, and the cloud having
          the new address from the link's return; prints each trial, p50 and max
";

/// Brings the node up (`extra` flags go to edgegate, after `--wan` if given), prints what to
/// try, and follows the commands typed until `quit`, end of input or Ctrl-C; then removes
/// everything.
pub fn run(mut extra: Vec<String>) -> Result<ExitCode> {
    if extra.first().is_some_and(|a| a == "--help" || a == "-h") {
        print!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    }
    let kind = if extra.first().is_some_and(|a| a == "--wan") {
        extra.remove(0);
        LinkKind::Wan(Wan::default())
    } else {
        LinkKind::Lan
    };
    eprintln!(
        "edgegate-dev: provisioning (the first run builds kube-apiserver, kube-controller-manager, kubelet and kube-proxy: ~20 min)…"
    );
    let tools = Toolchain::provision()?;
    let gateway = gateway_command(extra)?;
    eprintln!("edgegate-dev: starting the cloud and the node (about a minute)…");
    let mut testbed = Testbed::start_as(&tools, gateway, &kind)?;
    let node = &testbed.node;
    let pod = node.dir.join("pod.json");
    std::fs::write(
        &pod,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"sleeper"},"spec":{"nodeName":"edge-1","dnsPolicy":"Default","automountServiceAccountToken":false,"containers":[{"name":"main","image":"edgegate/busybox:test","imagePullPolicy":"Never","command":["/bin/sleep","100000"]}]}}"#,
    )?;
    println!(
        "\nNode {name} is Ready behind edgegate; the cloud is {cloud}, over a {link}.\n\
         In another shell:\n\n  \
         export KUBECONFIG={kc}\n  alias kubectl={kubectl}\n  \
         kubectl get nodes,pods,endpointslices -A -o wide\n  \
         kubectl apply -f {pod}              # a pod bound to the node (no scheduler runs)\n  \
         nsenter --net={netns} curl -s 127.0.0.1:10267/v1/readyz\n  \
         nsenter --net={netns} iptables-save -t nat | grep KUBE-SVC\n  \
         ctr --address {sock} -n k8s.io tasks ls\n  \
         tail -f {dir}/kubelet.log {dir}/edgegate.log {dir}/kube-proxy.log\n\n\
         Type here: cut | restore | restart kubelet | restart kube-proxy | restart edgegate | quit\n\
         (cut the link, watch the pods keep running and kubelet keep its lease; restart a\n\
         component while cut; restore and watch what changed in the cloud arrive)\n",
        name = node.name,
        cloud = testbed.cloud.cluster.url(),
        link = kind.describe(),
        kc = testbed.cloud.cluster.admin_kubeconfig.display(),
        kubectl = tools.kubectl.display(),
        pod = pod.display(),
        netns = testbed.link.path().display(),
        sock = node.containerd.socket.display(),
        dir = node.dir.display(),
    );

    let (tx, rx) = mpsc::channel::<String>();
    let stdin_tx = tx.clone();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if stdin_tx.send(line).is_err() {
                return;
            }
        }
        let _ = stdin_tx.send("quit".to_owned());
    });
    std::thread::spawn(move || {
        if let Ok(runtime) = tokio::runtime::Runtime::new() {
            runtime.block_on(async {
                let _ = tokio::signal::ctrl_c().await;
            });
        }
        let _ = tx.send("quit".to_owned());
    });
    while let Ok(line) = rx.recv() {
        let outcome = match line.trim() {
            "" => Ok(()),
            "quit" | "exit" => break,
            "cut" => testbed.link.cut(),
            "restore" => testbed.link.restore(),
            "restart kubelet" => {
                testbed.node.kill_kubelet();
                testbed.node.start_kubelet()
            }
            "restart kube-proxy" => {
                testbed.node.kill_kube_proxy();
                testbed.node.start_kube_proxy()
            }
            "restart edgegate" => {
                testbed.node.kill_gateway();
                testbed.node.start_gateway()
            }
            other => Err(anyhow::anyhow!("unknown command {other:?}")),
        };
        match outcome {
            Ok(()) => println!("ok"),
            Err(error) => println!("failed: {error:#}"),
        }
    }
    eprintln!("edgegate-dev: stopping the node and the cloud…");
    drop(testbed);
    Ok(ExitCode::SUCCESS)
}
