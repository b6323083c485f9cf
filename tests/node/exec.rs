//! kubectl's streaming commands (exec, attach, port-forward, logs -f) reach the real kubelet
//! through edgegate online, and get edgegate's `Status` refusal, not a hang, while the link
//! is cut; with two kubectls: 1.20, which speaks SPDY, and a current one, which tries
//! WebSocket first and falls back to SPDY when kubelet 1.20 refuses the upgrade. Which
//! protocol each stream was opened on is read from kubectl's own log. A WebSocket exec on
//! the subprotocol kubelet 1.20 speaks, sent raw as other clients send it, is switched.

mod commands;
mod kubectl;
mod offline;
mod protocol;
mod websocket;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::Testbed;
use edgegate_testkit::process::{unique, wait_until};

use self::kubectl::{GUARD, Kubectl, Version, describe, text};
use crate::support::{apply, pod, pod_status, wait_pods_running, wait_readyz};

/// The scenario's pod: `talker` echoes each line it reads on stdin (attach), `ticker`
/// prints a numbered line every 0.2 s (logs -f).
const CHATTY: &str = "chatty";

/// Online, with kubectl 1.20 and then the current one, through edgegate's HTTPS proxy on the
/// admin's token: `exec` returns the command's output and exit code and echoes piped stdin,
/// `attach` sees what a container reads on stdin, `logs -f` streams new lines,
/// `port-forward` gets the bridge pod's HTTP answer; each stream on the protocol that
/// kubectl must end on (SPDY, after a refused WebSocket upgrade for the current one); and a
/// WebSocket exec on `v4.channel.k8s.io`, sent raw as kube-rs sends it, is switched, its
/// frames carrying stdout, stderr and the exit code. With the link cut, each is refused with
/// edgegate's `ServiceUnavailable` `Status` (and an upgrade itself, SPDY or WebSocket, sent
/// raw, is answered 503, not switched). Leaves the link up, the gateway online, and no pod
/// of its own.
pub fn kubectl_exec_attach_port_forward_and_logs_reach_kubelet_through_edgegate(
    testbed: &mut Testbed,
) -> Result<()> {
    if testbed.link.is_cut() {
        testbed.link.restore()?;
    }
    wait_readyz(testbed, false)?;
    let kubectls = [
        Kubectl::new(testbed, Version::V1_20)?,
        Kubectl::new(testbed, Version::Current)?,
    ];
    apply(testbed, &chatty_pod().to_string())?;
    let online = online(testbed, &kubectls);
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

    let refused = offline::refused(testbed, &kubectls);
    testbed.link.restore()?;
    wait_readyz(testbed, false)?;
    testbed.node.wait_ready(&testbed.cloud)?;
    refused?;
    for kubectl in &kubectls {
        let token = unique("back");
        let back = kubectl.run(testbed, &["exec", "host", "--", "echo", &token], None)?;
        ensure!(
            back.status.success() && text(&back.stdout).trim() == token,
            "{} exec with the link back: {}",
            kubectl.name,
            describe(&back)
        );
    }
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

/// The online half: every command against running pods, with each kubectl.
fn online(testbed: &mut Testbed, kubectls: &[Kubectl]) -> Result<()> {
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
    for kubectl in kubectls {
        commands::exec(testbed, kubectl)?;
        commands::attach(testbed, kubectl)?;
        commands::logs_follow(testbed, kubectl)?;
        commands::port_forward(testbed, kubectl)?;
    }
    websocket::exec_v4(testbed)
}
