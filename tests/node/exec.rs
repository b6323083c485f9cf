//! kubectl's streaming commands (exec, attach, port-forward, logs -f; kubectl 1.20 over
//! SPDY) reach the real kubelet through edgegate online, and get edgegate's `Status`
//! refusal, not a hang, while the link is cut.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, ensure};
use edgegate_testkit::process::{unique, wait_until};
use edgegate_testkit::{ADMIN_TOKEN, Testbed, User};

use crate::support::{apply, ensure_cut, pod, pod_status, wait_pods_running, wait_readyz};

/// The scenario's pod: `talker` echoes each line it reads on stdin (attach), `ticker`
/// prints a numbered line every 0.2 s (logs -f).
const CHATTY: &str = "chatty";

/// What a kubectl command may take before it counts as hung: a guard, not a bound on speed.
const GUARD: Duration = Duration::from_secs(120);

/// The lines `kubectl logs -f` must stream after its first.
const STREAMED: u64 = 15;

/// What each of edgegate's refusals says while no apiserver is reachable.
const OFFLINE: &str = "the cloud is unreachable";

/// edgegate's HTTPS proxy inside the node, where a client's own token is sent on (its
/// serving certificate, from the cluster's CA, names 127.0.0.1). Not the plain proxy:
/// client-go sends no credentials to an `http://` server, so kubectl there would act on
/// the node's identity, which may not exec.
const HTTPS_PROXY: &str = "https://127.0.0.1:10268";

/// Online, through edgegate's HTTPS proxy on the admin's token: `exec` returns the command's
/// output and exit code and echoes piped stdin, `attach` sees what a container reads on
/// stdin, `logs -f` streams new lines, `port-forward` gets the bridge pod's HTTP answer.
/// With the link cut, each is refused with edgegate's `ServiceUnavailable` `Status` (and
/// the upgrade itself, sent raw, is answered 503, not switched). Leaves the link up, the
/// gateway online, and no pod of its own.
pub fn kubectl_exec_attach_port_forward_and_logs_reach_kubelet_through_edgegate(
    testbed: &mut Testbed,
) -> Result<()> {
    if testbed.link.is_cut() {
        testbed.link.restore()?;
    }
    wait_readyz(testbed, false)?;
    let kubectl = Kubectl::new(testbed)?;
    apply(testbed, &chatty_pod().to_string())?;
    let online = online(testbed, &kubectl);
    testbed.cloud.kubectl(&[
        "delete",
        "pod",
        CHATTY,
        "-n",
        "default",
        "--wait=true",
        "--timeout=120s",
    ])?;
    online?;

    let refused = refused_offline(testbed, &kubectl);
    testbed.link.restore()?;
    wait_readyz(testbed, false)?;
    testbed.node.wait_ready(&testbed.cloud)?;
    refused?;
    let token = unique("back");
    let back = kubectl.run(testbed, &["exec", "host", "--", "echo", &token], None)?;
    ensure!(
        back.status.success() && text(&back.stdout).trim() == token,
        "exec with the link back: {}",
        describe(&back)
    );
    Ok(())
}

/// The pod with `talker` (stdin open) and `ticker`, on the host's network.
fn chatty_pod() -> serde_json::Value {
    let mut pod = pod(CHATTY, true);
    let base = pod["spec"]["containers"][0].clone();
    let container = |name: &str, script: &str| {
        let mut container = base.clone();
        container["name"] = name.into();
        container["command"] = serde_json::json!(["/bin/sh", "-c", script]);
        container
    };
    let mut talker = container("talker", "while read line; do echo got:$line; done");
    talker["stdin"] = true.into();
    let ticker = container(
        "ticker",
        "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done",
    );
    pod["spec"]["containers"] = serde_json::json!([talker, ticker]);
    pod
}

/// The online half: every command against running pods.
fn online(testbed: &mut Testbed, kubectl: &Kubectl) -> Result<()> {
    wait_pods_running(testbed, &["host", "bridge"])?;
    wait_until(
        GUARD,
        "both containers of the chatty pod to be ready",
        || {
            pod_status(testbed, CHATTY).is_ok_and(|pod| {
                let all = pod["status"]["containerStatuses"].as_array().cloned();
                all.is_some_and(|all| all.len() == 2 && all.iter().all(|c| c["ready"] == true))
            })
        },
    )
    .with_context(|| testbed.node.log_tail("kubelet", 30))?;
    exec(testbed, kubectl)?;
    attach(testbed, kubectl)?;
    logs_follow(testbed, kubectl)?;
    port_forward(testbed, kubectl)
}

/// `exec` returns the output and the exit code of the command, and `exec -i` echoes stdin.
fn exec(testbed: &Testbed, kubectl: &Kubectl) -> Result<()> {
    let token = unique("edgegate-exec");
    let echoed = kubectl.run(testbed, &["exec", "host", "--", "echo", &token], None)?;
    ensure!(
        echoed.status.success() && text(&echoed.stdout).trim() == token,
        "exec echo: {}",
        describe(&echoed)
    );
    let hostname = kubectl.run(
        testbed,
        &["exec", "bridge", "--", "cat", "/etc/hostname"],
        None,
    )?;
    ensure!(
        text(&hostname.stdout).trim() == "bridge",
        "exec cat /etc/hostname in the bridge pod: {}",
        describe(&hostname)
    );
    let failed = kubectl.run(testbed, &["exec", "host", "--", "sh", "-c", "exit 3"], None)?;
    ensure!(
        failed.status.code() == Some(3),
        "exec of `exit 3`: {}",
        describe(&failed)
    );
    // More than a pipe's and a window's worth, so both directions wait on each other.
    let sent: String = (0..8192).map(|n| format!("{token} {n:05}\n")).collect();
    let cat = kubectl.run(testbed, &["exec", "-i", "host", "--", "cat"], Some(&sent))?;
    ensure!(
        cat.status.success() && text(&cat.stdout) == sent,
        "exec -i cat echoed {} of {} bytes: {}",
        cat.stdout.len(),
        sent.len(),
        text(&cat.stderr)
    );
    eprintln!(
        "exec: echo and cat /etc/hostname answered, `exit 3` exited {:?}, cat echoed {} bytes of stdin",
        failed.status.code(),
        cat.stdout.len()
    );
    Ok(())
}

/// `attach -i` to `talker`: each line sent comes back as its container's output.
fn attach(testbed: &Testbed, kubectl: &Kubectl) -> Result<()> {
    let mut attached = kubectl.stream(testbed, &["attach", "-i", CHATTY, "-c", "talker"])?;
    let token = unique("edgegate-attach");
    for n in 1..=3 {
        let line = format!("{token}-{n}");
        attached.send(&line)?;
        let got = attached.line()?;
        ensure!(
            got == format!("got:{line}"),
            "attach sent {line}, saw {got:?}"
        );
    }
    eprintln!("attach: 3 lines sent on stdin came back on stdout");
    Ok(())
}

/// `logs -f` of `ticker` streams [`STREAMED`] new lines, in order, until stopped.
fn logs_follow(testbed: &Testbed, kubectl: &Kubectl) -> Result<()> {
    let args = ["logs", "-f", CHATTY, "-c", "ticker", "--tail=1"];
    let followed = kubectl.stream(testbed, &args)?;
    let tick = |line: String| {
        let n = line
            .strip_prefix("tick ")
            .and_then(|n| n.parse::<u64>().ok());
        n.with_context(|| format!("not a tick: {line:?}"))
    };
    let first = tick(followed.line()?)?;
    let start = Instant::now();
    for k in 1..=STREAMED {
        let n = tick(followed.line()?)?;
        ensure!(
            n == first + k,
            "logs -f after tick {first}: tick {n}, not {}",
            first + k
        );
    }
    eprintln!(
        "logs -f: {STREAMED} new lines after tick {first} streamed in {:.1?}",
        start.elapsed()
    );
    Ok(())
}

/// `port-forward` to the bridge pod's port 80: requests to the local port inside the node get
/// its httpd's answer (its `/etc/hostname`).
fn port_forward(testbed: &Testbed, kubectl: &Kubectl) -> Result<()> {
    let forward = kubectl.stream(testbed, &["port-forward", "pod/bridge", ":80"])?;
    // "Forwarding from 127.0.0.1:PORT -> 80"
    let line = forward.line()?;
    let port = line
        .strip_prefix("Forwarding from 127.0.0.1:")
        .and_then(|rest| rest.split(' ').next())
        .with_context(|| format!("port-forward printed {line:?}"))?;
    let url = format!("http://127.0.0.1:{port}/etc/hostname");
    for _ in 0..3 {
        let body = testbed.node.run("curl", &["-s", "-m", "60", &url])?;
        ensure!(
            body.trim() == "bridge",
            "{url} through port-forward: {body:?}"
        );
    }
    eprintln!("port-forward: 3 requests to 127.0.0.1:{port} answered by the bridge pod");
    Ok(())
}

/// With the link cut, each command fails with edgegate's refusal, not a hang, and the exec
/// upgrade, sent as kubectl sends it, is answered with a 503 `Status`. Leaves the link cut.
fn refused_offline(testbed: &mut Testbed, kubectl: &Kubectl) -> Result<()> {
    ensure_cut(testbed)?;
    let commands: [&[&str]; 4] = [
        &["exec", "host", "--", "echo", "offline"],
        &["attach", "bridge"],
        &["port-forward", "pod/bridge", ":80"],
        &["logs", "-f", "host"],
    ];
    for args in commands {
        let out = kubectl.run(testbed, args, None)?;
        let said = text(&out.stderr);
        ensure!(
            !out.status.success() && said.contains("ServiceUnavailable") && said.contains(OFFLINE),
            "offline kubectl {}: {}",
            args.join(" "),
            describe(&out)
        );
        eprintln!(
            "offline: kubectl {} exited {:?}: {}",
            args[0],
            out.status.code(),
            said.trim()
        );
    }
    let url =
        format!("{HTTPS_PROXY}/api/v1/namespaces/default/pods/host/exec?command=true&stdout=true");
    let bearer = format!("Authorization: Bearer {ADMIN_TOKEN}");
    let ca = testbed.cloud.cluster.pki.ca_cert.display().to_string();
    let mut args = vec![
        "-s",
        "-m",
        "60",
        "--cacert",
        &ca,
        "-X",
        "POST",
        "-w",
        "\n%{http_code}",
    ];
    let headers = [
        "Connection: Upgrade",
        "Upgrade: SPDY/3.1",
        "X-Stream-Protocol-Version: v4.channel.k8s.io",
        &bearer,
    ];
    args.extend(headers.iter().flat_map(|header| ["-H", *header]));
    args.push(&url);
    let out = testbed.node.run("curl", &args)?;
    let (body, code) = out.rsplit_once('\n').context("curl printed no status")?;
    let status: serde_json::Value = serde_json::from_str(body)
        .with_context(|| format!("the offline exec upgrade answered {code}: {body}"))?;
    ensure!(
        code == "503"
            && status["kind"] == "Status"
            && status["reason"] == "ServiceUnavailable"
            && status["message"]
                .as_str()
                .is_some_and(|m| m.contains(OFFLINE)),
        "the offline exec upgrade answered {code}: {body}"
    );
    eprintln!(
        "offline: the exec upgrade itself answered {code}: {}",
        status["message"]
    );
    Ok(())
}

/// kubectl 1.20 inside the node, at edgegate's HTTPS proxy on the admin's token (the
/// gateway sends a client's own `Authorization` on).
struct Kubectl {
    program: PathBuf,
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    /// Its kubeconfig, discovery cache and logs in a scratch directory of the node's.
    fn new(testbed: &Testbed) -> Result<Kubectl> {
        let dir = testbed.node.dir.join(unique("kubectl"));
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join("admin.kubeconfig");
        let cluster = &testbed.cloud.cluster;
        cluster.kubeconfig_for(&kubeconfig, HTTPS_PROXY, &User::Token(ADMIN_TOKEN))?;
        Ok(Kubectl {
            program: cluster.tools().kubectl.clone(),
            kubeconfig,
            dir,
        })
    }

    /// kubectl `args` in the default namespace, in the node's network namespace, dying with
    /// the harness; `guarded` under `timeout`, which exits 124 once [`GUARD`] passes.
    fn command(&self, testbed: &Testbed, guarded: bool, args: &[&str]) -> Command {
        let inner = if guarded {
            let mut inner = testbed.node.command("timeout");
            inner.arg(GUARD.as_secs().to_string()).arg(&self.program);
            inner
        } else {
            testbed.node.command(&self.program.display().to_string())
        };
        let mut command = Command::new("setpriv");
        command
            .args(["--pdeathsig", "KILL", "--"])
            .arg(inner.get_program())
            .args(inner.get_args())
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--cache-dir={}", self.dir.join("cache").display()))
            .args(["-n", "default"])
            .args(args);
        command
    }

    /// Runs kubectl `args` to its end with `stdin` (written meanwhile); fails if it hung.
    fn run(&self, testbed: &Testbed, args: &[&str], stdin: Option<&str>) -> Result<Output> {
        let mut child = self
            .command(testbed, true, args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting kubectl")?;
        let writer = child.stdin.take().map(|mut pipe| {
            let bytes = stdin.unwrap_or_default().as_bytes().to_vec();
            std::thread::spawn(move || pipe.write_all(&bytes))
        });
        let output = child.wait_with_output()?;
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        ensure!(
            output.status.code() != Some(124),
            "kubectl {} hung: stopped after {GUARD:?}",
            args.join(" ")
        );
        Ok(output)
    }

    /// Starts kubectl `args`, which runs until stopped: its stdout read line by line.
    fn stream(&self, testbed: &Testbed, args: &[&str]) -> Result<Stream> {
        let stderr = self.dir.join(format!("{}.stderr", unique(args[0])));
        let mut child = self
            .command(testbed, false, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .context("starting kubectl")?;
        let stdout = child.stdout.take().context("kubectl's stdout")?;
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Stream {
            child,
            lines,
            stderr,
        })
    }
}

/// A kubectl left running, its stdout's lines as they come; killed when dropped.
struct Stream {
    child: Child,
    lines: Receiver<String>,
    stderr: PathBuf,
}

impl Stream {
    /// Its next line of output, within [`GUARD`].
    fn line(&self) -> Result<String> {
        self.lines.recv_timeout(GUARD).map_err(|_| {
            let said = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            anyhow!("kubectl printed no line within {GUARD:?} (or exited); its stderr: {said}")
        })
    }

    /// Writes `line` to its stdin.
    fn send(&mut self, line: &str) -> Result<()> {
        let stdin = self.child.stdin.as_mut().context("kubectl's stdin")?;
        writeln!(stdin, "{line}")?;
        Ok(stdin.flush()?)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bytes as text, lossily.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A finished kubectl's exit status, stdout and stderr, for a failure's message.
fn describe(output: &Output) -> String {
    format!(
        "exited {:?}; stdout {:?}; stderr {:?}",
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr)
    )
}
