//! The one-off measurements of edgegate with filters: idle RSS, peak RSS growth while a
//! 10 000-object LIST streams through the chain and the cache, and hot reload time from the
//! rename of a `.wasm` into the filter directory to the first response the new generation
//! filtered.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use edgegate_testkit::http;

use super::targets::Target;
use super::workload::{LIST_NAMESPACES, USER_AGENT};
use crate::proc;

/// Peak RSS growth of one streamed LIST.
#[derive(Clone, Copy, Debug)]
pub struct Growth {
    /// RSS before the list.
    pub before: u64,
    /// Peak RSS while it streamed and was committed.
    pub peak: u64,
    /// The list body's size.
    pub body: usize,
    /// The largest item of the list.
    pub largest: usize,
    /// Whether the cache committed it.
    pub committed: bool,
    /// Anonymous and file-backed resident bytes before the list.
    pub split_before: (u64, u64),
    /// The same once the list was committed.
    pub split_after: (u64, u64),
}

impl Growth {
    /// Peak minus before.
    pub fn growth(&self) -> u64 {
        self.peak.saturating_sub(self.before)
    }

    /// Growth of anonymous memory (heap, wasm memories), before → after; may be negative.
    pub fn anon_growth(&self) -> i64 {
        self.split_after.0 as i64 - self.split_before.0 as i64
    }

    /// Growth of file-backed memory: code and data of the binary paged in for the first time.
    pub fn file_growth(&self) -> i64 {
        self.split_after.1 as i64 - self.split_before.1 as i64
    }

    /// The goal: 2 × the largest object + 8 MB.
    pub fn bound(&self) -> u64 {
        2 * self.largest as u64 + 8 * 1024 * 1024
    }
}

/// One GET through `target` as `agent`; the body.
fn get(target: &Target, path: &str, agent: &str) -> Result<String> {
    let addr = target.authority().parse()?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: {agent}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    let response = http::raw_exchange(addr, request.as_bytes(), Duration::from_secs(30))?;
    if response.status != 200 {
        bail!("GET {path} answered {}: {}", response.status, response.body);
    }
    Ok(response.body)
}

/// Streams the 10 000-slice LIST through `target` (as kube-proxy: filtered and cached) and
/// measures the gateway's peak RSS growth until the cache has committed it.
pub fn list_growth(target: &Target, slices_api: &str) -> Result<Growth> {
    let pid = target.pid().context("a proxy")?;
    let commits = target.metric("edgegate_cache_commits_total")?;
    proc::reset_peak(pid)?;
    let before = proc::rss(pid)?;
    let split_before = proc::rss_split(pid)?;
    let path = format!(
        "{slices_api}/namespaces/{}/endpointslices",
        LIST_NAMESPACES[1].0
    );
    let body = get(target, &path, USER_AGENT)?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut committed = false;
    while Instant::now() < deadline {
        if target.metric("edgegate_cache_commits_total")? > commits {
            committed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let peak = proc::peak_rss(pid)?;
    let split_after = proc::rss_split(pid)?;
    let list: serde_json::Value = serde_json::from_str(&body)?;
    let items = list["items"].as_array().context("a list")?;
    if items.len() != LIST_NAMESPACES[1].1 {
        bail!("the list held {} items", items.len());
    }
    let largest = items.iter().map(|i| i.to_string().len()).max().unwrap_or(0);
    Ok(Growth {
        before,
        peak,
        body: body.len(),
        largest,
        committed,
        split_before,
        split_after,
    })
}

/// Resident memory of a proxy after it has been idle for a while.
pub fn idle_rss(target: &Target) -> Result<Option<u64>> {
    target.pid().map(proc::rss).transpose()
}

/// Hot reload times over `trials` renames.
#[derive(Clone, Debug, Default)]
pub struct Reloads {
    /// Rename of a new `.wasm` → first response filtered by it.
    pub added: Vec<Duration>,
    /// Removal of that `.wasm` → first response no longer filtered by it.
    pub removed: Vec<Duration>,
}

/// The component the `tagger` test filter applies to.
const TAGGER_AGENT: &str = "test/v1";

/// Renames a `tagger` component (with a config naming the trial) into the filter directory,
/// then asks for a ConfigMap until an answer carries the trial's tag; then removes it and asks
/// until none does. The client asks back to back, so the figure is the reload's, to within
/// one request (well under a millisecond).
pub fn hot_reload(target: &Target, tagger: &Path, trials: usize) -> Result<Reloads> {
    let dir = target
        .filter_dir
        .as_ref()
        .context("edgegate with filters")?;
    let wasm = std::fs::read(tagger).with_context(|| format!("reading {}", tagger.display()))?;
    let path = "/api/v1/namespaces/bench/configmaps/probe";
    let mut reloads = Reloads::default();
    for trial in 0..trials {
        let name = format!("reload{trial}");
        let tag = format!("\"trial-{trial}-tag\"");
        let toml = format!("[config]\ntag = {tag}\n");
        // NAME.toml first, then the component, each written aside and renamed in.
        let part = dir.join(format!(".{name}.toml.part"));
        std::fs::write(&part, toml)?;
        std::fs::rename(&part, dir.join(format!("{name}.toml")))?;
        let part = dir.join(format!(".{name}.wasm.part"));
        std::fs::write(&part, &wasm)?;
        let renamed = Instant::now();
        std::fs::rename(&part, dir.join(format!("{name}.wasm")))?;
        reloads.added.push(until(renamed, || {
            Ok(get(target, path, TAGGER_AGENT)?.contains(&tag[1..tag.len() - 1]))
        })?);
        let removed = Instant::now();
        std::fs::remove_file(dir.join(format!("{name}.wasm")))?;
        reloads.removed.push(until(removed, || {
            Ok(!get(target, path, TAGGER_AGENT)?.contains(&tag[1..tag.len() - 1]))
        })?);
        std::fs::remove_file(dir.join(format!("{name}.toml")))?;
    }
    Ok(reloads)
}

fn until(since: Instant, mut done: impl FnMut() -> Result<bool>) -> Result<Duration> {
    while since.elapsed() < Duration::from_secs(10) {
        if done()? {
            return Ok(since.elapsed());
        }
    }
    bail!("the new generation did not answer within 10 s")
}
