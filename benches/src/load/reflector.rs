//! The node's simulated agents (`edgegate-load traffic-agents`, run inside the node's network
//! namespace): coredns, a CNI agent and DaemonSet agents, each a client with a reflector per
//! resource that does what client-go's does — list with `resourceVersion=0` (paginated by
//! `limit=500`), then watch from the list's version with bookmarks, re-watch from the last
//! version seen when a watch ends, re-list on `410 Gone` or an `ERROR` event — and discards
//! what it reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Result, bail};
use http_body_util::BodyExt;

use super::kube::{self, Client};

/// What each agent lists and watches.
pub const RESOURCES: &[&str] = &[
    "/api/v1/services",
    "/apis/discovery.k8s.io/v1beta1/endpointslices",
    "/api/v1/nodes",
];

/// The agents' `User-Agent`s: coredns, a CNI agent and three DaemonSets.
pub const AGENTS: &[&str] = &[
    "coredns/v1.8.0 (linux/amd64) kubernetes/$Format",
    "flanneld/v0.13.0 (linux/amd64) kubernetes/$Format",
    "node-exporter/v1.0.1 (linux/amd64) kubernetes/$Format",
    "fluent-bit/v1.6.0 (linux/amd64) kubernetes/$Format",
    "csi-node-driver/v2.1.0 (linux/amd64) kubernetes/$Format",
];

/// What the reflectors did, summed.
#[derive(Default)]
pub struct Counters {
    /// List requests (each page counts).
    pub lists: AtomicU64,
    /// List pages that came in protobuf.
    pub protobuf: AtomicU64,
    /// List pages that came gzip-compressed.
    pub gzip: AtomicU64,
    /// Re-lists after `410 Gone` or an `ERROR` event.
    pub relists: AtomicU64,
    /// Watch requests.
    pub watches: AtomicU64,
    /// Events read (bookmarks included).
    pub events: AtomicU64,
    /// Of those, per resource (in the order of [`RESOURCES`]).
    pub by_resource: [AtomicU64; RESOURCES.len()],
    /// Of those, bookmarks.
    pub bookmarks: AtomicU64,
    /// Of those, objects at a version no newer than one the watch had shown: sent again
    /// (a gateway's re-filtering).
    pub repeats: AtomicU64,
    /// Failed requests (retried after a second).
    pub errors: AtomicU64,
}

/// Runs every agent's reflectors against `server` until the process is killed, printing the
/// counters every 10 s.
pub async fn run(server: &str, ca: Option<&std::path::Path>, token: Option<String>) -> Result<()> {
    let counters = Arc::new(Counters::default());
    for agent in AGENTS {
        let client = Arc::new(Client::new(server, ca, token.clone(), agent)?);
        for (i, resource) in RESOURCES.iter().enumerate() {
            let (client, counters) = (client.clone(), counters.clone());
            tokio::spawn(async move { reflect(&client, (i, resource), &counters).await });
        }
    }
    let mut ticks = tokio::time::interval(Duration::from_secs(10));
    loop {
        ticks.tick().await;
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        eprintln!(
            "agents: lists={} (protobuf {}, gzip {}) relists={} watches={} events={} ({}; bookmarks {}, repeats {}) errors={}",
            n(&counters.lists),
            n(&counters.protobuf),
            n(&counters.gzip),
            n(&counters.relists),
            n(&counters.watches),
            n(&counters.events),
            counters
                .by_resource
                .iter()
                .zip(RESOURCES)
                .map(|(c, r)| format!("{} {}", r.rsplit('/').next().unwrap_or(r), n(c)))
                .collect::<Vec<_>>()
                .join(", "),
            n(&counters.bookmarks),
            n(&counters.repeats),
            n(&counters.errors)
        );
    }
}

/// One reflector, forever.
async fn reflect(client: &Client, (i, resource): (usize, &str), counters: &Counters) {
    let mut version: Option<String> = None;
    loop {
        let result = match &version {
            None => list(client, resource, counters).await.map(Some),
            Some(from) => watch(client, (i, resource), from, counters).await,
        };
        match result {
            Ok(next) => version = next,
            Err(error) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("{resource}: {error:#}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Lists `resource` whole (following `continue`); its `resourceVersion`.
async fn list(client: &Client, resource: &str, counters: &Counters) -> Result<String> {
    let mut path = format!("{resource}?limit=500&resourceVersion=0");
    loop {
        counters.lists.fetch_add(1, Ordering::Relaxed);
        let response = client.get(&path).await?;
        if !response.status().is_success() {
            bail!("list answered {}", response.status());
        }
        let protobuf = kube::is_protobuf(&response);
        counters
            .protobuf
            .fetch_add(u64::from(protobuf), Ordering::Relaxed);
        counters
            .gzip
            .fetch_add(u64::from(kube::is_gzip(&response)), Ordering::Relaxed);
        let body = kube::body_bytes(response).await?;
        let (version, next) = kube::list_meta(&body, protobuf)?;
        if next.is_empty() {
            return Ok(version);
        }
        path = format!("{resource}?limit=500&continue={next}");
    }
}

/// Watches `resource` from `version` until the watch ends: the version to watch from next,
/// or `None` to re-list.
async fn watch(
    client: &Client,
    (i, resource): (usize, &str),
    version: &str,
    counters: &Counters,
) -> Result<Option<String>> {
    // client-go's reflector: a random timeout between its minimum (5 min) and twice that.
    let timeout = 300 + u64::from(std::process::id() + resource.len() as u32) % 300;
    let path = format!(
        "{resource}?allowWatchBookmarks=true&resourceVersion={version}&timeoutSeconds={timeout}&watch=true"
    );
    counters.watches.fetch_add(1, Ordering::Relaxed);
    let response = client.get(&path).await?;
    if response.status() == http::StatusCode::GONE {
        counters.relists.fetch_add(1, Ordering::Relaxed);
        return Ok(None);
    }
    if !response.status().is_success() {
        bail!("watch answered {}", response.status());
    }
    let protobuf = kube::is_protobuf(&response);
    let mut body = response.into_body();
    let mut pending: Vec<u8> = Vec::new();
    let mut last = version.to_owned();
    let mut newest: u64 = version.parse().unwrap_or(0);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        pending.extend_from_slice(&data);
        while let Some(event) = next_event(&mut pending, protobuf) {
            counters.events.fetch_add(1, Ordering::Relaxed);
            counters.by_resource[i].fetch_add(1, Ordering::Relaxed);
            let (kind, at) = kube::watch_event(&event, protobuf)?;
            if kind == "ERROR" {
                counters.relists.fetch_add(1, Ordering::Relaxed);
                return Ok(None);
            }
            if kind == "BOOKMARK" {
                counters.bookmarks.fetch_add(1, Ordering::Relaxed);
            } else if let Ok(at) = at.parse::<u64>() {
                if at <= newest {
                    counters.repeats.fetch_add(1, Ordering::Relaxed);
                }
                newest = newest.max(at);
            }
            if !at.is_empty() {
                last = at;
            }
        }
    }
    Ok(Some(last))
}

/// The next whole event in `pending` (a length-prefixed protobuf frame or a JSON line),
/// taken out of it.
fn next_event(pending: &mut Vec<u8>, protobuf: bool) -> Option<Vec<u8>> {
    if protobuf {
        let len = u32::from_be_bytes(pending.get(..4)?.try_into().ok()?) as usize;
        pending.get(4..4 + len)?;
        let event = pending[4..4 + len].to_vec();
        pending.drain(..4 + len);
        return Some(event);
    }
    let end = pending.iter().position(|&b| b == b'\n')?;
    let line: Vec<u8> = pending.drain(..=end).collect();
    Some(line)
}

/// A counter of the agents' counters line (`events=123`).
pub fn counter(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_protobuf_frames_and_json_lines() {
        let mut pending = vec![0, 0, 0, 2, b'a', b'b', 0, 0, 0, 3, b'c'];
        assert_eq!(next_event(&mut pending, true), Some(b"ab".to_vec()));
        assert_eq!(next_event(&mut pending, true), None);
        assert_eq!(pending.len(), 5);
        let mut lines = b"{}\n{".to_vec();
        assert_eq!(next_event(&mut lines, false), Some(b"{}\n".to_vec()));
        assert_eq!(next_event(&mut lines, false), None);
    }
}
