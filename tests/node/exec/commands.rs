//! The online half, for one kubectl: `exec`, `attach`, `logs -f` and `port-forward` against
//! running pods, each stream's protocol read from kubectl's log.

use std::time::Instant;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::Testbed;
use edgegate_testkit::process::unique;

use super::CHATTY;
use super::kubectl::{Kubectl, LOGGED, describe, text};
use super::protocol::{Answers, Opened, Upgrade, ensure_opened};

/// The lines `kubectl logs -f` must stream after its first.
const STREAMED: u64 = 15;

/// `exec` returns the output and the exit code of the command, and `exec -i` echoes stdin
/// (its stream's protocol read from that one's log: it must succeed, see [`LOGGED`]).
pub fn exec(testbed: &Testbed, kubectl: &Kubectl) -> Result<()> {
    let hostname = kubectl.run(
        testbed,
        &["exec", "bridge", "--", "cat", "/etc/hostname"],
        None,
    )?;
    ensure!(
        text(&hostname.stdout).trim() == "bridge",
        "{} exec cat /etc/hostname in the bridge pod: {}",
        kubectl.name,
        describe(&hostname)
    );
    let failed = kubectl.run(testbed, &["exec", "host", "--", "sh", "-c", "exit 3"], None)?;
    ensure!(
        failed.status.code() == Some(3),
        "{} exec of `exit 3`: {}",
        kubectl.name,
        describe(&failed)
    );
    // More than a pipe's and a window's worth, so both directions wait on each other.
    let token = unique("edgegate-exec");
    let sent: String = (0..8192).map(|n| format!("{token} {n:05}\n")).collect();
    let before = Answers::read(testbed)?;
    let cat = kubectl.run(
        testbed,
        &[LOGGED, "exec", "-i", "host", "--", "cat"],
        Some(&sent),
    )?;
    ensure!(
        cat.status.success() && text(&cat.stdout) == sent,
        "{} exec -i cat echoed {} of {} bytes: {}",
        kubectl.name,
        cat.stdout.len(),
        sent.len(),
        describe(&cat)
    );
    let log = text(&cat.stderr);
    let opened = ensure_opened(testbed, kubectl, Upgrade::RemoteCommand, &log, &before)?;
    eprintln!(
        "{} exec: {opened}; cat /etc/hostname answered, `exit 3` exited {:?}, cat echoed {} bytes of stdin",
        kubectl.name,
        failed.status.code(),
        cat.stdout.len()
    );
    Ok(())
}

/// `attach -i` to `talker`: each line sent comes back as its container's output.
pub fn attach(testbed: &Testbed, kubectl: &Kubectl) -> Result<()> {
    let before = Answers::read(testbed)?;
    let mut attached =
        kubectl.stream(testbed, &[LOGGED, "attach", "-i", CHATTY, "-c", "talker"])?;
    let token = unique("edgegate-attach");
    for n in 1..=3 {
        let line = format!("{token}-{n}");
        attached.send(&line)?;
        let got = attached.line()?;
        ensure!(
            got == format!("got:{line}"),
            "{} attach sent {line}, saw {got:?}",
            kubectl.name
        );
    }
    let opened = ensure_opened(
        testbed,
        kubectl,
        Upgrade::RemoteCommand,
        &attached.log()?,
        &before,
    )?;
    eprintln!(
        "{} attach: {opened}; 3 lines sent on stdin came back on stdout",
        kubectl.name
    );
    Ok(())
}

/// `logs -f` of `ticker` streams [`STREAMED`] new lines, in order, until stopped: a plain
/// GET, no upgrade.
pub fn logs_follow(testbed: &Testbed, kubectl: &Kubectl) -> Result<()> {
    let args = [LOGGED, "logs", "-f", CHATTY, "-c", "ticker", "--tail=1"];
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
            "{} logs -f after tick {first}: tick {n}, not {}",
            kubectl.name,
            first + k
        );
    }
    let opened = Opened::read(&followed.log()?);
    ensure!(
        opened == Opened::default(),
        "{} logs -f tried an upgrade: {opened:?}",
        kubectl.name
    );
    eprintln!(
        "{} logs -f: {}; {STREAMED} new lines after tick {first} streamed in {:.1?}",
        kubectl.name,
        opened.describe(),
        start.elapsed()
    );
    Ok(())
}

/// `port-forward` to the bridge pod's port 80: requests to the local port inside the node get
/// its httpd's answer (its `/etc/hostname`).
pub fn port_forward(testbed: &Testbed, kubectl: &Kubectl) -> Result<()> {
    let before = Answers::read(testbed)?;
    let forward = kubectl.stream(testbed, &[LOGGED, "port-forward", "pod/bridge", ":80"])?;
    // "Forwarding from 127.0.0.1:PORT -> 80"
    let line = forward.line()?;
    let port = line
        .strip_prefix("Forwarding from 127.0.0.1:")
        .and_then(|rest| rest.split(' ').next())
        .with_context(|| format!("{} port-forward printed {line:?}", kubectl.name))?;
    let url = format!("http://127.0.0.1:{port}/etc/hostname");
    for _ in 0..3 {
        let body = testbed.node.run("curl", &["-s", "-m", "60", &url])?;
        ensure!(
            body.trim() == "bridge",
            "{url} through {}'s port-forward: {body:?}",
            kubectl.name
        );
    }
    let opened = ensure_opened(
        testbed,
        kubectl,
        Upgrade::PortForward,
        &forward.log()?,
        &before,
    )?;
    eprintln!(
        "{} port-forward: {opened}; 3 requests to 127.0.0.1:{port} answered by the bridge pod",
        kubectl.name
    );
    Ok(())
}
