//! Which protocol a command's stream was opened on, from kubectl's own log (`-v=8`: the
//! WebSocket subprotocol it offered, the answer that refused it, the `101`'s `Upgrade` and
//! `X-Stream-Protocol-Version`), and what edgegate counted of those answers.
//!
//! Against the cloud's kubelet 1.20, through kube-apiserver 1.20, which passes an upgrade on
//! as it comes: kubectl 1.20 asks for SPDY alone. The current kubectl asks for WebSocket
//! first, offering only what kubelet 1.20 does not speak (`v5.channel.k8s.io` for exec and
//! attach, refused 403; SPDY tunnelled in WebSocket for port-forward, refused 400 for the
//! `port` query parameter kubelet 1.20 wants), and falls back to SPDY.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail, ensure};
use edgegate_testkit::Testbed;

use super::kubectl::{Kubectl, Version, klog_header};

/// A command whose stream is opened by switching protocols.
#[derive(Clone, Copy, Debug)]
pub enum Upgrade {
    /// `exec` and `attach`: kubelet's remote command.
    RemoteCommand,
    /// `port-forward`.
    PortForward,
}

/// How a command opened its stream, as kubectl logged it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Opened {
    /// The WebSocket subprotocol offered (`Sec-Websocket-Protocol`), if WebSocket was tried.
    pub offered: Option<String>,
    /// The answer that refused the WebSocket upgrade (`403 Forbidden`), and what it said.
    pub refused: Option<String>,
    /// The `101`'s `Upgrade` and `X-Stream-Protocol-Version`.
    pub switched: Option<(String, String)>,
}

impl Opened {
    /// What kubectl's `-v=8` log shows (either kubectl's format).
    pub fn read(log: &str) -> Opened {
        let lines: Vec<&str> = log.lines().collect();
        let offered = lines.iter().find_map(|line| {
            let (name, value) = header(line)?;
            name.eq_ignore_ascii_case("Sec-Websocket-Protocol")
                .then(|| value.to_owned())
        });
        let refused = lines.iter().find_map(|line| {
            // `… websocket: bad handshake (403 Forbidden)`, or `(400 Bad Request): why`.
            let (_, rest) = line.split_once("websocket: bad handshake (")?;
            let (status, why) = rest.split_once(')')?;
            let why = why.trim_start_matches(':').trim().trim_end_matches('"');
            Some(if why.is_empty() {
                status.to_owned()
            } else {
                format!("{status}: {why}")
            })
        });
        let switched = lines
            .iter()
            .position(|line| line.contains("101 Switching Protocols"))
            .and_then(|at| {
                let mut upgrade = None;
                let mut version = None;
                for line in &lines[at + 1..] {
                    if message(line).trim() == "Response Headers:" {
                        continue;
                    }
                    let Some((name, value)) = header(line) else {
                        break;
                    };
                    if name.eq_ignore_ascii_case("Upgrade") {
                        upgrade = Some(value.to_owned());
                    } else if name.eq_ignore_ascii_case("X-Stream-Protocol-Version") {
                        version = Some(value.to_owned());
                    }
                }
                Some((upgrade?, version?))
            });
        Opened {
            offered,
            refused,
            switched,
        }
    }

    /// What `version` of kubectl does to open `upgrade` through edgegate to the cloud's
    /// kubelet 1.20.
    pub fn expected(version: Version, upgrade: Upgrade) -> Opened {
        let owned = |s: &str| Some(s.to_owned());
        let (offered, refused, protocol) = match upgrade {
            Upgrade::RemoteCommand => ("v5.channel.k8s.io", "403 Forbidden", "v4.channel.k8s.io"),
            Upgrade::PortForward => (
                "SPDY/3.1+portforward.k8s.io",
                r#"400 Bad Request: query parameter "port" is required"#,
                "portforward.k8s.io",
            ),
        };
        let switched = Some(("SPDY/3.1".to_owned(), protocol.to_owned()));
        match version {
            Version::V1_20 => Opened {
                switched,
                ..Opened::default()
            },
            Version::Current => Opened {
                offered: owned(offered),
                refused: owned(refused),
                switched,
            },
        }
    }

    /// In words, for what is printed.
    pub fn describe(&self) -> String {
        let mut words = Vec::new();
        if let Some(offered) = &self.offered {
            let refused = self.refused.as_deref().unwrap_or("not refused");
            words.push(format!("WebSocket ({offered}) answered {refused}"));
        }
        match &self.switched {
            Some((upgrade, protocol)) => words.push(format!("{upgrade} ({protocol})")),
            None => words.push("no upgrade".to_owned()),
        }
        words.join(", then ")
    }

    /// The answers other than 200 edgegate must have passed on to kubectl's requests on pods
    /// meanwhile: the refused WebSocket upgrade (a GET), then the switch (a POST).
    fn answers(&self) -> Answers {
        let mut answers = BTreeMap::new();
        if let Some(refused) = &self.refused {
            let code = refused.split(' ').next().unwrap_or_default();
            answers.insert(("get".to_owned(), code.to_owned()), 1);
        }
        if self.switched.is_some() {
            answers.insert(("create".to_owned(), "101".to_owned()), 1);
        }
        Answers(answers)
    }
}

/// Checks that `kubectl` opened `upgrade`'s stream as it must (its `log`), and that edgegate
/// passed each answer on (its counts now against `before`); says how, for what is printed.
pub fn ensure_opened(
    testbed: &Testbed,
    kubectl: &Kubectl,
    upgrade: Upgrade,
    log: &str,
    before: &Answers,
) -> Result<String> {
    let opened = Opened::read(log);
    let expected = Opened::expected(kubectl.version, upgrade);
    let relevant: Vec<&str> = log
        .lines()
        .filter(|line| {
            [
                "Sec-Websocket-Protocol",
                "bad handshake",
                "Switching",
                "Upgrade:",
            ]
            .iter()
            .any(|p| line.contains(p))
        })
        .collect();
    ensure!(
        opened == expected,
        "{} opened {upgrade:?} as {opened:?}, not {expected:?}; its log: {relevant:#?}",
        kubectl.name
    );
    let passed = Answers::read(testbed)?.since(before);
    let answers = expected.answers();
    ensure!(
        passed == answers,
        "{}'s {upgrade:?}: edgegate answered {passed:?}, not {answers:?}",
        kubectl.name
    );
    Ok(format!(
        "{} (through edgegate: {answers})",
        opened.describe()
    ))
}

/// edgegate's count of its answers other than 200 to kubectl's requests on pods, by verb and
/// code (`edgegate_requests_total`).
#[derive(Debug, PartialEq, Eq)]
pub struct Answers(BTreeMap<(String, String), u64>);

impl Answers {
    /// The counts now.
    pub fn read(testbed: &Testbed) -> Result<Answers> {
        Answers::of(testbed, "kubectl")
    }

    /// The counts now of `component`'s requests (its `User-Agent`'s product).
    pub fn of(testbed: &Testbed, component: &str) -> Result<Answers> {
        let (status, text) = testbed.node.hub("/metrics")?;
        if status != 200 {
            bail!("/metrics answered {status}");
        }
        let prefix = format!(r#"edgegate_requests_total{{component="{component}","#);
        let mut answers = BTreeMap::new();
        for line in text.lines() {
            let Some(labels) = line.strip_prefix(&prefix) else {
                continue;
            };
            let (Some(verb), Some("pods"), Some(code)) = (
                label(labels, "verb"),
                label(labels, "resource"),
                label(labels, "code"),
            ) else {
                continue;
            };
            let count = line.rsplit(' ').next().unwrap_or_default();
            let count = count
                .parse::<f64>()
                .with_context(|| format!("a count in {line:?}"))?;
            if code != "200" {
                answers.insert((verb.to_owned(), code.to_owned()), count as u64);
            }
        }
        Ok(Answers(answers))
    }

    /// What was counted since `before`.
    pub fn since(&self, before: &Answers) -> Answers {
        let grown = self.0.iter().filter_map(|(key, &now)| {
            let then = before.0.get(key).copied().unwrap_or_default();
            (now > then).then(|| (key.clone(), now - then))
        });
        Answers(grown.collect())
    }
}

impl std::fmt::Display for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let each: Vec<String> = self
            .0
            .iter()
            .map(|((verb, code), n)| format!("{n} {verb} {code}"))
            .collect();
        f.write_str(&each.join(", "))
    }
}

/// A label's value in a Prometheus sample's labels.
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    let (_, rest) = labels.split_once(&format!("{name}=\""))?;
    Some(rest.split_once('"')?.0)
}

/// A header line of kubectl's log (`Name: value`), in either kubectl's format.
fn header(line: &str) -> Option<(&str, &str)> {
    let (name, value) = message(line).trim().split_once(": ")?;
    let token = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    token.then(|| (name, value.trim()))
}

/// A log line without its klog header (`I1206 07:52:16.048590   25104 file.go:42] `).
fn message(line: &str) -> &str {
    match line.split_once("] ") {
        Some((_, message)) if klog_header(line) => message,
        _ => line,
    }
}
