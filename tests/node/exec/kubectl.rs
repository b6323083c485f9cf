//! A kubectl inside the node, at edgegate's HTTPS proxy on the admin's token: 1.20, or the
//! current one.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use edgegate_testkit::process::unique;
use edgegate_testkit::{ADMIN_TOKEN, Testbed, User};

/// What a kubectl command may take before it counts as hung: a guard, not a bound on speed.
pub const GUARD: Duration = Duration::from_secs(120);

/// The flag that has kubectl log each request's headers and its answer's status and headers,
/// on stderr. Not for a command whose exit code counts: from `-v=6` on, kubectl 1.20 exits
/// through klog's fatal log, with 255.
pub const LOGGED: &str = "-v=8";

/// edgegate's HTTPS proxy inside the node, where a client's own token is sent on (its
/// serving certificate, from the cluster's CA, names 127.0.0.1). Not the plain proxy:
/// client-go sends no credentials to an `http://` server, so kubectl there would act on
/// the node's identity, which may not exec.
pub const HTTPS_PROXY: &str = "https://127.0.0.1:10268";

/// Which kubectl.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// 1.20.2, the cloud's version: SPDY alone.
    V1_20,
    /// Debian sid's: WebSocket first, then SPDY.
    Current,
}

/// A kubectl in the node: its kubeconfig, discovery cache and logs in a scratch directory.
pub struct Kubectl {
    pub version: Version,
    /// Its `gitVersion` (`v1.36.4`), for what is printed.
    pub name: String,
    program: PathBuf,
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    /// The `version` of kubectl, set up in a scratch directory of the node's.
    pub fn new(testbed: &Testbed, version: Version) -> Result<Kubectl> {
        let cluster = &testbed.cloud.cluster;
        let program = match version {
            Version::V1_20 => cluster.tools().kubectl.clone(),
            Version::Current => cluster.tools().kubectl_current.clone(),
        };
        ensure!(
            program.is_file(),
            "{} is missing; run tests/cluster/provision.sh",
            program.display()
        );
        let out = Command::new(&program)
            .args(["version", "--client", "-o", "json"])
            .output()
            .with_context(|| format!("running {}", program.display()))?;
        let said: serde_json::Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("{} version: {}", program.display(), text(&out.stderr)))?;
        let name = said["clientVersion"]["gitVersion"]
            .as_str()
            .context("kubectl version printed no gitVersion")?;
        let dir = testbed.node.dir.join(unique("kubectl"));
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join("admin.kubeconfig");
        cluster.kubeconfig_for(&kubeconfig, HTTPS_PROXY, &User::Token(ADMIN_TOKEN))?;
        Ok(Kubectl {
            version,
            name: format!("kubectl {name}"),
            program,
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
    pub fn run(&self, testbed: &Testbed, args: &[&str], stdin: Option<&str>) -> Result<Output> {
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
            "{} {} hung: stopped after {GUARD:?}",
            self.name,
            args.join(" ")
        );
        Ok(output)
    }

    /// Starts kubectl `args`, which runs until stopped: its stdout read line by line.
    pub fn stream(&self, testbed: &Testbed, args: &[&str]) -> Result<Stream> {
        let verb = args.iter().find(|arg| !arg.starts_with('-'));
        let stderr = self.dir.join(unique(verb.unwrap_or(&"kubectl")));
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
pub struct Stream {
    child: Child,
    lines: Receiver<String>,
    stderr: PathBuf,
}

impl Stream {
    /// Its next line of output, within [`GUARD`].
    pub fn line(&self) -> Result<String> {
        self.lines.recv_timeout(GUARD).map_err(|_| {
            let log = std::fs::read(&self.stderr).unwrap_or_default();
            anyhow!(
                "kubectl printed no line within {GUARD:?} (or exited); its stderr: {}",
                said(&log)
            )
        })
    }

    /// Writes `line` to its stdin.
    pub fn send(&mut self, line: &str) -> Result<()> {
        let stdin = self.child.stdin.as_mut().context("kubectl's stdin")?;
        writeln!(stdin, "{line}")?;
        Ok(stdin.flush()?)
    }

    /// What it logged so far.
    pub fn log(&self) -> Result<String> {
        Ok(text(&std::fs::read(&self.stderr)?))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bytes as text, lossily.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What kubectl said on stderr besides its log ([`LOGGED`]): its errors.
pub fn said(stderr: &[u8]) -> String {
    let stderr = text(stderr);
    let mut said = Vec::new();
    let mut in_block = false;
    for line in stderr.lines() {
        if klog_header(line) {
            // A multi-line entry (`headers=<`, a `server response object`) goes on until a
            // line that closes it or another entry.
            in_block = line.ends_with('<') || line.ends_with("[{");
        } else if in_block {
            in_block = !(line.starts_with(" >") || line.starts_with("}]"));
        } else {
            said.push(line);
        }
    }
    said.join("\n")
}

/// Whether `line` opens a klog entry: `I1206 07:52:16.048590   25104 file.go:42] …`.
pub fn klog_header(line: &str) -> bool {
    let bytes = line.as_bytes();
    bytes.len() > 5
        && matches!(bytes[0], b'I' | b'W' | b'E' | b'F')
        && bytes[1..5].iter().all(u8::is_ascii_digit)
}

/// A finished kubectl's exit status, stdout and what it said, for a failure's message.
pub fn describe(output: &Output) -> String {
    format!(
        "exited {:?}; stdout {:?}; stderr {:?}",
        output.status.code(),
        text(&output.stdout),
        said(&output.stderr)
    )
}
