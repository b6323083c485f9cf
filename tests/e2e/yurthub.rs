//! An operator swaps YurtHub's image for edgegate's and leaves its static pod manifest as it
//! is: YurtHub's own argument list starts edgegate, and it serves.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::process::{Process, free_port, wait_until};
use edgegate_testkit::{ADMIN_TOKEN, User, http};

use crate::support::{Env, client, get_as, runtime, unique};

const KUBELET: &str = "kubelet/v1.31.0 (linux/amd64) kubernetes/9bfc1c2";

/// The `command` of YurtHub's static pod (after `yurthub`), as `yurtadm join` renders it:
/// `YurthubTemplate` in `pkg/yurtadm/constants/constants.go` of openyurtio/openyurt at
/// fbefb6baca665cf4431cf37100a9cc0c0528fb4d, every optional flag present. The `{{…}}`
/// parameters are filled in, and `$(NODE_NAME)` as kubelet expands it. The cloud template
/// (`charts/yurthub/templates/yurthub-cloud-yurtstaticset.yaml`) differs in
/// `--working-mode=cloud`.
fn yurthub_command(server: &str, working_mode: &str) -> Vec<String> {
    [
        "--v=2",
        "--bind-address=127.0.0.1",
        &format!("--server-addr={server}"),
        "--node-name=edge-node-1",
        "--bootstrap-file=/var/lib/yurthub/bootstrap-hub.conf",
        &format!("--working-mode={working_mode}"),
        "--namespace=kube-system",
        "--enable-dummy-if=true",
        "--enable-node-pool=true",
        "--hub-cert-organizations=openyurt:edge",
        "--nodepool-name=pool-a",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A gateway started with YurtHub's arguments; `extra` are what this machine needs besides:
/// credentials (the template's --bootstrap-file is not written here; `certificates` tests
/// the certificate manager), and ports and a cache directory of its own (the machine is
/// shared).
struct Hub {
    process: Process,
    hub: std::net::SocketAddr,
    proxy: u16,
    cache: std::path::PathBuf,
}

fn start(env: &Env, working_mode: &str, dir: &Path) -> Result<Hub> {
    std::fs::create_dir_all(dir)?;
    let (proxy, hub) = (free_port()?, free_port()?);
    let cache = dir.join("cache");
    let mut args = yurthub_command(&env.cluster.url(), working_mode);
    args.extend([
        format!("--kubeconfig={}", env.cluster.gateway_kubeconfig.display()),
        format!("--proxy-port={proxy}"),
        format!("--serve-port={hub}"),
        format!("--disk-cache-path={}", cache.display()),
    ]);
    let mut process = Process::spawn("edgegate", &env.bin, &args, &dir.join("edgegate.log"))?;
    let hub = std::net::SocketAddr::from(([127, 0, 0, 1], hub));
    let up = wait_until(Duration::from_secs(30), "edgegate /v1/healthz", || {
        http::get(hub, "/v1/healthz").is_ok_and(|r| r.status == 200)
    });
    if let Err(error) = up {
        process.check_running()?;
        return Err(error.context(process.log_tail(30)));
    }
    Ok(Hub {
        process,
        hub,
        proxy,
        cache,
    })
}

/// What the cache holds, read from its file once the gateway has stopped.
fn cached_rows(env: &Env, hub: &Hub) -> Result<Vec<String>> {
    let output = Command::new(&env.bin)
        .args(["cache", "ls", "--serve-port", &hub.hub.port().to_string()])
        .arg("--disk-cache-path")
        .arg(&hub.cache)
        .output()?;
    ensure!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?
        .lines()
        .filter(|l| l.starts_with("kubelet"))
        .map(str::to_owned)
        .collect())
}

/// YurtHub's static pod arguments, unchanged, start edgegate in edge mode: it serves kubectl
/// and kubelet, caches kubelet's answers, and names once each flag it does not give
/// YurtHub's meaning; with the cloud template's `--working-mode=cloud` it serves and
/// caches nothing.
pub fn yurthubs_own_arguments_start_edgegate(env: &Env) -> Result<()> {
    let dir = env.cluster.dir.join(unique("yurthub-args"));
    for mode in ["edge", "cloud"] {
        let mut hub = start(env, mode, &dir.join(mode))?;
        let proxy = format!("http://127.0.0.1:{}", hub.proxy);
        let kubeconfig = dir.join(mode).join("admin.kubeconfig");
        env.cluster
            .kubeconfig_for(&kubeconfig, &proxy, &User::Token(ADMIN_TOKEN))?;
        let out = edgegate_testkit::cluster::kubectl(
            env.cluster.tools(),
            &kubeconfig,
            &["get", "namespace", "kube-system", "-o", "name"],
        )?;
        ensure!(out.trim() == "namespace/kube-system", "{mode}: {out}");
        let (status, _) = runtime().block_on(get_as(
            &client(),
            &format!("{proxy}/api/v1/namespaces"),
            KUBELET,
        ))?;
        ensure!(status == 200, "{mode}: kubelet's list got {status}");
        if mode == "edge" {
            crate::support::wait_sets(hub.hub, "kubelet", 1)?;
        }
        hub.process.terminate(Duration::from_secs(10));
        let log = std::fs::read_to_string(hub.process.log_path())?;
        let warned = log
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("--bootstrap-file"))
            .count();
        ensure!(
            warned == 1,
            "{mode}: --bootstrap-file named {warned} times:\n{log}"
        );
        let rows = cached_rows(env, &hub).with_context(|| mode.to_owned())?;
        match mode {
            "edge" => ensure!(!rows.is_empty(), "edge mode cached nothing"),
            _ => ensure!(rows.is_empty(), "cloud mode cached {rows:#?}"),
        }
    }
    Ok(())
}

/// A stand-in apiserver that answers only when the test says: every request it reads is
/// handed over with the connection it came on.
fn held_apiserver() -> Result<(u16, std::sync::mpsc::Receiver<(String, TcpStream)>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let Ok(writer) = stream.try_clone() else {
                    return;
                };
                let mut reader = BufReader::new(stream);
                // The gateway's own list of yurt-hub-cfg is held unanswered and not
                // reported: the test's requests are the ones it counts.
                let mut unreported = Vec::new();
                loop {
                    let mut first = String::new();
                    if reader.read_line(&mut first).unwrap_or(0) == 0 {
                        return;
                    }
                    // The rest of the head; the gateway's GETs carry no body.
                    let mut line = String::new();
                    while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                        line.clear();
                    }
                    let Ok(writer) = writer.try_clone() else {
                        return;
                    };
                    if first.contains("yurt-hub-cfg") {
                        unreported.push(writer);
                        continue;
                    }
                    if tx.send((first.trim().to_owned(), writer)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok((port, rx))
}

/// `--max-requests-in-flight=1`: while one short request is being served, the next gets a
/// `429` Status with `Retry-After`; a watch is still forwarded; once the first is answered,
/// short requests are forwarded again. Cloud mode runs no health checker: nothing but these
/// requests and the gateway's own list of yurt-hub-cfg (held unanswered: not counted) reaches
/// the stand-in (in edge mode its probes would come first).
pub fn requests_beyond_max_in_flight_get_429(env: &Env) -> Result<()> {
    let (upstream, requests) = held_apiserver()?;
    let dir = env.cluster.dir.join(unique("in-flight"));
    std::fs::create_dir_all(&dir)?;
    let (proxy, hub) = (free_port()?, free_port()?);
    let args = [
        format!("--server-addr=http://127.0.0.1:{upstream}"),
        "--working-mode=cloud".to_owned(),
        "--max-requests-in-flight=1".to_owned(),
        // The held apiserver sees only the test's requests: no multiplexer feed.
        "--pool-scope-resources=".to_owned(),
        format!("--proxy-port={proxy}"),
        format!("--serve-port={hub}"),
        format!("--disk-cache-path={}", dir.join("cache").display()),
    ];
    let mut process = Process::spawn("edgegate", &env.bin, &args, &dir.join("edgegate.log"))?;
    let hub = std::net::SocketAddr::from(([127, 0, 0, 1], hub));
    wait_until(Duration::from_secs(30), "edgegate /v1/healthz", || {
        http::get(hub, "/v1/healthz").is_ok_and(|r| r.status == 200)
    })
    .map_err(|e| e.context(process.log_tail(30)))?;
    let proxy = std::net::SocketAddr::from(([127, 0, 0, 1], proxy));
    let patience = Duration::from_secs(30);
    let send = |path: &str| -> Result<TcpStream> {
        let mut client = TcpStream::connect(proxy)?;
        write!(
            client,
            "GET {path} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n"
        )?;
        Ok(client)
    };
    let reached = |what: &str| -> Result<(String, TcpStream)> {
        let (line, stream) = requests
            .recv_timeout(patience)
            .with_context(|| format!("{what} never reached the apiserver"))?;
        Ok((line, stream))
    };

    let first = send("/api/v1/namespaces/default")?;
    let (line, mut held) = reached("the first get")?;
    ensure!(
        line.starts_with("GET /api/v1/namespaces/default "),
        "{line}"
    );

    let refused = http::get(proxy, "/api/v1/namespaces/kube-system")?;
    ensure!(refused.status == 429, "{refused:?}");
    ensure!(
        refused.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{}",
        refused.head
    );
    let status: serde_json::Value = serde_json::from_str(&refused.body)?;
    ensure!(status["reason"] == "TooManyRequests", "{status}");

    let _watch = send("/api/v1/namespaces?watch=true")?;
    let (line, _watching) = reached("the watch")?;
    ensure!(line.contains("watch=true"), "{line}");

    let body = r#"{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"default"}}"#;
    write!(
        held,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    BufReader::new(first).read_to_string(&mut answer)?;
    ensure!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let _again = send("/api/v1/namespaces/kube-public")?;
    let (line, _) = reached("a get after the first was answered")?;
    ensure!(
        line.starts_with("GET /api/v1/namespaces/kube-public "),
        "{line}"
    );
    process.terminate(Duration::from_secs(5));
    Ok(())
}
