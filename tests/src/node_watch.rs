//! A watch through the gateway from inside the node, as a component on the node makes one:
//! `curl -N` in the node's network namespace, its events read on a thread as they arrive,
//! each with the moment it arrived, and the moment the watch ended.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::node::{GATEWAY_URL, Node};

/// What a watch's reader thread saw.
enum Seen {
    /// An event, when it arrived.
    Event(Instant, serde_json::Value),
    /// The end of the response, when it came.
    End(Instant),
}

/// One watch through the gateway's plain proxy inside the node.
pub struct NodeWatch {
    child: Child,
    seen: Receiver<Seen>,
    ended: Option<Instant>,
}

impl NodeWatch {
    /// Opens a watch of `path` (with its query: `watch=true` and the rest) as `agent`.
    pub fn open(node: &Node, agent: &str, path: &str) -> Result<NodeWatch> {
        let url = format!("{GATEWAY_URL}{path}");
        let mut child = node
            .command("curl")
            .args(["-sN", "-A", agent, "-H"])
            .arg("Accept: application/json")
            .arg(&url)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting curl in the node")?;
        let stdout = child.stdout.take().context("curl has no stdout")?;
        let (tx, seen) = channel();
        std::thread::spawn(move || {
            let lines = BufReader::new(stdout).lines();
            for line in lines {
                let Ok(line) = line else { break };
                if let Ok(event) = serde_json::from_str(&line)
                    && tx.send(Seen::Event(Instant::now(), event)).is_err()
                {
                    return;
                }
            }
            let _ = tx.send(Seen::End(Instant::now()));
        });
        Ok(NodeWatch {
            child,
            seen,
            ended: None,
        })
    }

    /// The next event and when it arrived; `None` once the watch has ended. Fails when
    /// nothing came within `guard` (a hang guard, not a bound on time).
    pub fn next(&mut self, guard: Duration) -> Result<Option<(Instant, serde_json::Value)>> {
        if self.ended.is_some() {
            return Ok(None);
        }
        match self.seen.recv_timeout(guard) {
            Ok(Seen::Event(at, event)) => Ok(Some((at, event))),
            Ok(Seen::End(at)) => {
                self.ended = Some(at);
                Ok(None)
            }
            Err(RecvTimeoutError::Disconnected) => bail!("the watch's reader is gone"),
            Err(RecvTimeoutError::Timeout) => bail!("nothing on the watch for {guard:?}"),
        }
    }

    /// Reads events until the watch ends; when it ended, and the resourceVersion of the
    /// last event that carried one (`None` when none did).
    pub fn until_end(&mut self, guard: Duration) -> Result<(Instant, Option<String>)> {
        let mut last = None;
        while let Some((_, event)) = self.next(guard)? {
            if let Some(version) = event["object"]["metadata"]["resourceVersion"].as_str() {
                last = Some(version.to_owned());
            }
        }
        let ended = self.ended.context("the watch ended")?;
        Ok((ended, last))
    }

    /// Reads events until one satisfies `wanted`: it, and when it arrived. Fails when the
    /// watch ends first.
    pub fn wait_for(
        &mut self,
        guard: Duration,
        mut wanted: impl FnMut(&serde_json::Value) -> bool,
    ) -> Result<(Instant, serde_json::Value)> {
        while let Some((at, event)) = self.next(guard)? {
            if wanted(&event) {
                return Ok((at, event));
            }
        }
        bail!("the watch ended before the event awaited")
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
