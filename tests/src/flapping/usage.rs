//! A gateway's resources before and after a flapping link: descriptors (and what they are),
//! threads, resident memory, async tasks; the wait for them to come back.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::process::wait_until;

/// A gateway's file descriptors, threads, resident memory and async tasks.
#[derive(Clone, Debug)]
pub struct Usage {
    /// Open file descriptors.
    pub fds: usize,
    /// Of them, accepted connections whose client holds the other end open: the client's
    /// to keep (an idle one the gateway closes in time), not counted against the margin,
    /// nor are their tasks.
    pub held: usize,
    /// The open descriptors by what they are (as `accepted on :8080 CLOSE_WAIT`), for a
    /// failure to name what grew.
    pub kinds: BTreeMap<String, usize>,
    /// Threads.
    pub threads: usize,
    /// Resident memory, KiB.
    pub rss_kib: u64,
    /// Tasks alive in its runtime (`edgegate_runtime_alive_tasks`).
    pub tasks: u64,
}

/// Reads a gateway's `/metrics` text.
pub type Metrics<'a> = &'a dyn Fn() -> Result<String>;

/// What a flapping link leaves idle is gone by then: the longest of the timeouts that close
/// it is the upstream pool's idle timeout, 90 s.
pub const SETTLED_WITHIN: Duration = Duration::from_secs(120);

/// How far a usage may be above its baseline and still be back: 16 descriptors, 4 threads,
/// 32 MiB, 32 tasks, besides the connections clients hold and their tasks.
const MARGIN: Usage = Usage {
    fds: 16,
    held: 0,
    kinds: BTreeMap::new(),
    threads: 4,
    rss_kib: 32 * 1024,
    tasks: 32,
};

impl Usage {
    /// What the gateway, process `pid`, uses now; its tasks read from `metrics`.
    pub fn of(pid: u32, metrics: Metrics<'_>) -> Result<Usage> {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
        let descriptors = Descriptors::of(pid)?;
        let threads = std::fs::read_dir(format!("/proc/{pid}/task"))?.count();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss_kib = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("VmRSS")?;
        let tasks = metrics()?
            .lines()
            .find_map(|line| line.strip_prefix("edgegate_runtime_alive_tasks "))
            .and_then(|v| v.trim().parse().ok())
            .context("edgegate_runtime_alive_tasks in /metrics")?;
        Ok(Usage {
            fds,
            held: descriptors.held.min(fds),
            kinds: descriptors.kinds,
            threads,
            rss_kib,
            tasks,
        })
    }

    /// What grew beyond the margin from `before`, one phrase each; empty when back.
    pub fn grown_from(&self, before: &Usage) -> Vec<&'static str> {
        [
            (
                self.fds - self.held > before.fds - before.held + MARGIN.fds,
                "file descriptors",
            ),
            (self.threads > before.threads + MARGIN.threads, "threads"),
            (self.rss_kib > before.rss_kib + MARGIN.rss_kib, "RSS"),
            // A connection is served by a task of its own.
            (
                self.tasks.saturating_sub(self.held as u64)
                    > before.tasks.saturating_sub(before.held as u64) + MARGIN.tasks,
                "tasks",
            ),
        ]
        .into_iter()
        .filter_map(|(grown, what)| grown.then_some(what))
        .collect()
    }

    /// The kinds of descriptor whose count changed from `before`, as `kind: before → now`.
    pub fn kinds_changed_from(&self, before: &Usage) -> Vec<String> {
        let kinds: BTreeSet<&String> = before.kinds.keys().chain(self.kinds.keys()).collect();
        kinds
            .into_iter()
            .filter_map(|kind| {
                let was = before.kinds.get(kind).copied().unwrap_or(0);
                let now = self.kinds.get(kind).copied().unwrap_or(0);
                (was != now).then(|| format!("{kind}: {was} → {now}"))
            })
            .collect()
    }

    /// Waits (up to `timeout`, which must outlast [`SETTLED_WITHIN`]) until the gateway's
    /// usage is back within the margin of `before`: what a flapping link leaves idle goes
    /// by itself, not at once (the keep-alive connections opened meanwhile when the
    /// gateway's header read timeout, 30 s, closes them; the upstream connections the
    /// re-lists left in the client's pool after its idle timeout, 90 s; tokio's idle
    /// blocking threads after 10 s), and a leak never settles. The usage then and the time
    /// it took; an error naming what grew, and which descriptors, if it did not settle.
    pub fn settle(
        pid: u32,
        metrics: Metrics<'_>,
        before: &Usage,
        timeout: Duration,
    ) -> Result<(Usage, Duration)> {
        let started = Instant::now();
        let _ = wait_until(
            timeout,
            "the gateway's fds, threads, RSS and tasks to settle",
            || Usage::of(pid, metrics).is_ok_and(|usage| usage.grown_from(before).is_empty()),
        );
        let took = started.elapsed();
        let after = Usage::of(pid, metrics)?;
        let grown = after.grown_from(before);
        anyhow::ensure!(
            grown.is_empty(),
            "{} grew: {before} → {after}; descriptors by kind: {}",
            grown.join(", "),
            after.kinds_changed_from(before).join(", ")
        );
        Ok((after, took))
    }
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} fds ({} held by clients), {} threads, {:.1} MiB, {} tasks",
            self.fds,
            self.held,
            self.threads,
            self.rss_kib as f64 / 1024.0,
            self.tasks
        )
    }
}

/// Process `pid`'s open descriptors, by what they are and how many of its accepted
/// connections a client holds.
#[derive(Debug, Default)]
struct Descriptors {
    /// A TCP socket as `listening :port`, `accepted on :port` (a connection to one of its
    /// listeners) or `to :port` (one it opened), with its TCP state unless established
    /// (`to :443 CLOSE_WAIT`); `unix or other socket`; `anon_inode:[eventfd]` and the like;
    /// `pipe`; `file`.
    kinds: BTreeMap<String, usize>,
    /// Accepted connections established at both ends: a client in the same network
    /// namespace holds the other end open.
    held: usize,
}

impl Descriptors {
    /// Reads them from `/proc/<pid>/fd` and the network namespace's `/proc/<pid>/net/tcp{,6}`.
    fn of(pid: u32) -> Result<Descriptors> {
        let sockets = tcp_sockets(pid)?;
        let listening: BTreeSet<u16> = sockets
            .values()
            .filter(|s| s.state == LISTEN)
            .map(|s| s.local.1)
            .collect();
        // Each established socket's ends, to find the client's end of an accepted one.
        let established: BTreeSet<(&End, &End)> = sockets
            .values()
            .filter(|s| s.state == ESTABLISHED)
            .map(|s| (&s.local, &s.remote))
            .collect();
        let mut descriptors = Descriptors::default();
        for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
            // A descriptor closed between the listing and the read is no longer open.
            let Ok(target) = std::fs::read_link(entry?.path()) else {
                continue;
            };
            let target = target.to_string_lossy();
            let socket = target
                .strip_prefix("socket:[")
                .and_then(|rest| rest.strip_suffix(']'))
                .map(|inode| {
                    inode
                        .parse()
                        .ok()
                        .and_then(|inode: u64| sockets.get(&inode))
                });
            let kind = match socket {
                Some(Some(s)) if s.state == LISTEN => format!("listening :{}", s.local.1),
                Some(Some(s)) if listening.contains(&s.local.1) => {
                    if s.state == ESTABLISHED && established.contains(&(&s.remote, &s.local)) {
                        descriptors.held += 1;
                    }
                    format!("accepted on :{}{}", s.local.1, state_name(&s.state))
                }
                Some(Some(s)) => format!("to :{}{}", s.remote.1, state_name(&s.state)),
                Some(None) => "unix or other socket".to_string(),
                None if target.starts_with("anon_inode:") => target.into_owned(),
                None if target.starts_with("pipe:") => "pipe".to_string(),
                None => "file".to_string(),
            };
            *descriptors.kinds.entry(kind).or_insert(0) += 1;
        }
        Ok(descriptors)
    }
}

/// `/proc/net/tcp`'s TCP_ESTABLISHED.
const ESTABLISHED: &str = "01";
/// `/proc/net/tcp`'s TCP_LISTEN.
const LISTEN: &str = "0A";

/// One end of a TCP connection: its address as the table writes it (hex) and its port.
type End = (String, u16);

/// A TCP socket of `/proc/<pid>/net/tcp{,6}`: its ends and state (the table's hex).
struct TcpSocket {
    local: End,
    remote: End,
    state: String,
}

/// The TCP sockets of `pid`'s network namespace by inode (those a process holds).
fn tcp_sockets(pid: u32) -> Result<HashMap<u64, TcpSocket>> {
    let mut sockets = HashMap::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))?;
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(remote), Some(state), Some(inode)) =
                (fields.get(1), fields.get(2), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let end = |end: &str| {
                let (address, port) = end.rsplit_once(':')?;
                Some((address.to_owned(), u16::from_str_radix(port, 16).ok()?))
            };
            let (Some(local), Some(remote), Ok(inode)) = (end(local), end(remote), inode.parse())
            else {
                continue;
            };
            // Inode 0: an orphan the kernel is closing, held by no process.
            if inode != 0 {
                let state = (*state).to_owned();
                sockets.insert(
                    inode,
                    TcpSocket {
                        local,
                        remote,
                        state,
                    },
                );
            }
        }
    }
    Ok(sockets)
}

/// A TCP state of `/proc/net/tcp` (`include/net/tcp_states.h`), empty for established.
fn state_name(hex: &str) -> &'static str {
    match hex {
        ESTABLISHED => "",
        "02" => " SYN_SENT",
        "03" => " SYN_RECV",
        "04" => " FIN_WAIT1",
        "05" => " FIN_WAIT2",
        "06" => " TIME_WAIT",
        "07" => " CLOSE",
        "08" => " CLOSE_WAIT",
        "09" => " LAST_ACK",
        LISTEN => " LISTEN",
        "0B" => " CLOSING",
        _ => " (unknown state)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener, a connection to it and the accepted end are named as such; the accepted
    /// end is held while the client keeps its end, and not once the client closes it.
    #[test]
    fn a_listener_and_its_connections_are_told_apart() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_accepted, _) = listener.accept().unwrap();
        let open = Descriptors::of(std::process::id()).unwrap();
        assert_eq!(open.kinds.get(&format!("listening :{port}")), Some(&1));
        assert_eq!(open.kinds.get(&format!("accepted on :{port}")), Some(&1));
        assert_eq!(open.kinds.get(&format!("to :{port}")), Some(&1));
        assert!(open.held >= 1, "{open:?}");
        drop(client);
        let closing = format!("accepted on :{port} CLOSE_WAIT");
        wait_until(
            Duration::from_secs(30),
            "the client's close to arrive",
            || {
                Descriptors::of(std::process::id())
                    .is_ok_and(|now| now.kinds.get(&closing) == Some(&1))
            },
        )
        .unwrap();
    }
}
