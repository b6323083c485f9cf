//! `cargo dev`: a local control plane (etcd and kube-apiserver on loopback) with edgegate in
//! front of it, for trying the gateway out. Extra arguments are passed to edgegate.
//!
//! `cargo dev --node`: a real edge node behind edgegate (see `node.rs`);
//! `cargo dev --node --trials N`: reconnect times measured on it (see `trials.rs`);
//! `cargo dev --node --boot-trials N`: offline boots measured on it (see `boots.rs`).

mod boots;
mod node;
mod trials;

use std::process::ExitCode;

use clap::Parser;
use edgegate::cli::Cli;
use edgegate::config::Config;
use edgegate::server;
use edgegate_testkit::{ADMIN_TOKEN, Cluster, Etcd, Toolchain, User};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let result = match args.peek().map(String::as_str) {
        Some("--node") => match args.nth(1) {
            Some(flag) if flag == "--trials" => trials::run(args.collect()),
            Some(flag) if flag == "--boot-trials" => boots::run(args.collect()),
            first => node::run(first.into_iter().chain(args).collect()),
        },
        Some(node::GATEWAY) => node::gateway(args.skip(1).collect()),
        _ => run(),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("edgegate-dev: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    eprintln!(
        "edgegate-dev: provisioning etcd, kubectl and the Kubernetes binaries (a first run installs the apt packages and builds the four binaries from source: 5–20 minutes on 2 cores)…"
    );
    let tools = Toolchain::provision()?;
    let etcd = std::sync::Arc::new(Etcd::start(&tools)?);
    eprintln!("edgegate-dev: starting kube-apiserver…");
    let cluster = Cluster::start(&tools, etcd)?;

    let mut args = vec![
        "edgegate".to_owned(),
        format!("--server-addr={}", cluster.url()),
        format!("--kubeconfig={}", cluster.gateway_kubeconfig.display()),
        format!("--disk-cache-path={}", cluster.dir.join("cache").display()),
    ];
    args.extend(std::env::args().skip(1));
    let cli = Cli::parse_from(&args);
    let proxy = format!(
        "http://{}:{}",
        cli.run.bind_proxy_address, cli.run.proxy_port
    );
    let hub = format!("http://{}:{}", cli.run.bind_address, cli.run.serve_port);
    let kubeconfig = cluster.dir.join("via-edgegate.kubeconfig");
    cluster.kubeconfig_for(&kubeconfig, &proxy, &User::Token(ADMIN_TOKEN))?;

    println!(
        "\nkube-apiserver {apiserver} is up, edgegate proxies it on {proxy}.\nTry, in another shell:\n\n  export KUBECONFIG={kc}\n  alias kubectl={kubectl}\n  kubectl get namespaces\n  kubectl create configmap hello --from-literal=greeting=hi\n  kubectl get configmaps -w\n  curl {hub}/v1/readyz\n  curl -s {hub}/metrics | grep edgegate_requests\n\nCtrl-C stops everything.\n",
        apiserver = cluster.url(),
        kc = kubeconfig.display(),
        kubectl = tools.kubectl.display(),
    );

    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(cli.run.log_filter()))
        .init();
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let config = Config::from_args(&cli.run)?;
        server::run(config, server::Hooks::default(), async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
        anyhow::Ok(())
    })?;
    drop(cluster);
    Ok(ExitCode::SUCCESS)
}
