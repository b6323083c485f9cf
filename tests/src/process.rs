//! Child processes of the harness: spawned so they die with the test process, logged to a
//! file, stopped on drop.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A port that was free a moment ago on 127.0.0.1, from below the kernel's range of
/// ephemeral ports. A port of that range (what binding port 0 gives) may be taken by any
/// outgoing connection between the moment it is picked and the moment a server binds it, or
/// binds it again after a restart: a gateway restarted by a kill -9 test once found its port
/// held so. Ports are handed out in turn from a start that differs between test processes.
pub fn free_port() -> Result<u16> {
    static NEXT: AtomicUsize = AtomicUsize::new(usize::MAX);
    let (low, high) = fixed_port_range();
    let span = usize::from(high - low);
    let seed = std::process::id() as usize * 7919
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.subsec_nanos() as usize);
    let _ = NEXT.compare_exchange(
        usize::MAX,
        seed % span,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..span {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed) % span;
        // `offset < span`, and `low + span` is a port.
        let port = low + offset as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// The ports [`free_port`] picks from: the 12 000 below the first ephemeral port
/// (`net.ipv4.ip_local_port_range`, 32768 by default), none below 1024.
fn fixed_port_range() -> (u16, u16) {
    let first_ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let high = first_ephemeral.max(2048);
    (high.saturating_sub(12_000).max(1024), high)
}

/// A name nothing else of this test process uses: for scratch directories, which a free
/// port cannot name (released at once, it may be handed out again while the first user of
/// the name still runs).
pub fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Raises this process's soft limit of open files to its hard limit (children, such as a
/// gateway spawned afterwards, inherit it), as Go's runtime does at start; fails when the
/// hard limit is below `needed`.
pub fn raise_fd_limit(needed: u64) -> Result<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if hard < needed {
        bail!("the hard limit of open files is {hard}; the test needs {needed}");
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    Ok(hard)
}

/// The open file descriptors of process `pid`.
pub fn open_fds(pid: u32) -> Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

/// A field of `/proc/<pid>/status` given in kB (`VmRSS:`, `VmHWM:`), in bytes.
pub fn proc_status_bytes(pid: u32, field: &str) -> Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    let kb: u64 = line.split_whitespace().nth(1).context("a value")?.parse()?;
    Ok(kb * 1024)
}

/// Polls `ready` every 100 ms until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, what: &str, mut ready: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("timed out after {timeout:?} waiting for {what}")
}

/// Polls `done` from async code, letting the runtime run between polls, until it holds;
/// panics after 30 s, a guard against a hang rather than a deadline.
pub async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let poll = async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(30), poll)
        .await
        .is_err()
    {
        panic!("{what} never happened");
    }
}

/// A child process with its output in a log file; killed when dropped.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `program` with `args`, stdout and stderr appended to `log`. The child gets
    /// SIGKILL if the thread that started it dies, so a crashed test leaves nothing behind.
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path) -> Result<Process> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let err = out.try_clone()?;
        let child = Command::new("setpriv")
            .arg("--pdeathsig")
            .arg("KILL")
            .arg("--")
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {name} ({})", program.display()))?;
        Ok(Process {
            name: name.to_owned(),
            child,
            log: log.to_owned(),
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Fails with the tail of the log if the process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            bail!(
                "{} exited with {status}; its log ends with:\n{}",
                self.name,
                self.log_tail(40)
            );
        }
        Ok(())
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub fn terminate(&mut self, grace: Duration) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !self.is_running() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
    }

    /// The exit status, waiting for it.
    pub fn wait(&mut self) -> Result<std::process::ExitStatus> {
        Ok(self.child.wait()?)
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}
