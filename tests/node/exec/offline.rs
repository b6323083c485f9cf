//! The offline half: with the link cut, each command fails with edgegate's refusal, not a
//! hang, and an upgrade sent as kubectl sends it (SPDY, WebSocket) is answered with a 503
//! `Status`, not switched.

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{ADMIN_TOKEN, Testbed};

use super::kubectl::{HTTPS_PROXY, Kubectl, describe, text};
use super::websocket::{exec_path, upgrade_headers};
use crate::support::ensure_cut;

/// What each of edgegate's refusals says while no apiserver is reachable.
const OFFLINE: &str = "the cloud is unreachable";

/// Each of `kubectls`' commands is refused; then each kind of exec upgrade, sent raw, is
/// answered 503. Leaves the link cut.
pub fn refused(testbed: &mut Testbed, kubectls: &[Kubectl]) -> Result<()> {
    ensure_cut(testbed)?;
    let commands: [&[&str]; 4] = [
        &["exec", "host", "--", "echo", "offline"],
        &["attach", "bridge"],
        &["port-forward", "pod/bridge", ":80"],
        &["logs", "-f", "host"],
    ];
    for kubectl in kubectls {
        for args in commands {
            let out = kubectl.run(testbed, args, None)?;
            let said = text(&out.stderr);
            ensure!(
                !out.status.success()
                    && said.contains("ServiceUnavailable")
                    && said.contains(OFFLINE),
                "offline {} {}: {}",
                kubectl.name,
                args.join(" "),
                describe(&out)
            );
            eprintln!(
                "offline: {} {} exited {:?}: {}",
                kubectl.name,
                args[0],
                out.status.code(),
                said.trim()
            );
        }
    }
    let websocket = upgrade_headers("ZWRnZWdhdGUtb2ZmbGluZQ==", "v5.channel.k8s.io");
    let websocket: Vec<&str> = websocket.iter().map(String::as_str).collect();
    for (protocol, method, headers) in [
        (
            "SPDY",
            "POST",
            &[
                "Upgrade: SPDY/3.1",
                "X-Stream-Protocol-Version: v4.channel.k8s.io",
            ][..],
        ),
        ("WebSocket", "GET", &websocket[..]),
    ] {
        raw_upgrade_refused(testbed, protocol, method, headers)?;
    }
    Ok(())
}

/// The exec upgrade to `protocol`, sent by curl as kubectl sends it (`method`, `headers`),
/// is answered 503 with edgegate's `Status`.
fn raw_upgrade_refused(
    testbed: &Testbed,
    protocol: &str,
    method: &str,
    headers: &[&str],
) -> Result<()> {
    let url = format!("{HTTPS_PROXY}{}", exec_path("command=true&stdout=true"));
    let bearer = format!("Authorization: Bearer {ADMIN_TOKEN}");
    let ca = testbed.cloud.cluster.pki.ca_cert.display().to_string();
    let mut args = vec![
        "-s",
        "-m",
        "60",
        "--http1.1",
        "--cacert",
        &ca,
        "-X",
        method,
        "-w",
        "\n%{http_code}",
        "-H",
        "Connection: Upgrade",
        "-H",
        &bearer,
    ];
    args.extend(headers.iter().flat_map(|header| ["-H", *header]));
    args.push(&url);
    let out = testbed.node.run("curl", &args)?;
    let (body, code) = out.rsplit_once('\n').context("curl printed no status")?;
    let status: serde_json::Value = serde_json::from_str(body)
        .with_context(|| format!("the offline {protocol} exec upgrade answered {code}: {body}"))?;
    ensure!(
        code == "503"
            && status["kind"] == "Status"
            && status["reason"] == "ServiceUnavailable"
            && status["message"]
                .as_str()
                .is_some_and(|m| m.contains(OFFLINE)),
        "the offline {protocol} exec upgrade answered {code}: {body}"
    );
    eprintln!(
        "offline: the {protocol} exec upgrade itself ({method}) answered {code}: {}",
        status["message"]
    );
    Ok(())
}
