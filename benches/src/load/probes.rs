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
    /// Rename of a component the gateway has compiled before, with a new config → first
    /// response filtered by it.
    pub added: Vec<Duration>,
    /// Removal of that `.wasm` → first response no longer filtered by it.
    pub removed: Vec<Duration>,
    /// Rename of a component never seen before, which the gateway compiles with none of its
    /// functions compiled before → first response filtered by it, the client asking back to
    /// back.
    pub compiled: Vec<Duration>,
    /// The same with a client that pauses 1 ms between requests.
    pub compiled_paced: Vec<Duration>,
    /// Rename of a new build of a component compiled before (new bytes, the same code),
    /// whose functions the gateway takes from its store, the client asking back to back.
    pub compiled_known: Vec<Duration>,
}

/// Trials of each kind that compile a new component (each takes about a second).
pub const COMPILE_TRIALS: usize = 5;

/// How long the paced client waits between requests.
const PACE: Duration = Duration::from_millis(1);

/// The component the `tagger` test filter applies to.
const TAGGER_AGENT: &str = "test/v1";

/// Renames a `tagger` component (with a config naming the trial) into the filter directory,
/// then asks for a ConfigMap until an answer carries the trial's tag; then removes it and asks
/// until none does. First [`COMPILE_TRIALS`] trials with a component the gateway has never
/// seen (the tagger with a custom section naming the trial): asked back to back and then
/// with a pause with the gateway's compiled functions deleted first, then back to back with
/// them; then `trials` with the last of those, compiled by then, and a new config.
/// Asked back to back, the figure is the reload's to within one request (well under a
/// millisecond), on a gateway kept busy; paced, to within the pause.
pub fn hot_reload(target: &Target, tagger: &Path, trials: usize) -> Result<Reloads> {
    let wasm = std::fs::read(tagger).with_context(|| format!("reading {}", tagger.display()))?;
    let mut reloads = Reloads::default();
    let mut compiled = wasm.clone();
    for trial in 0..COMPILE_TRIALS {
        for (pace, cold, times) in [
            (None, true, &mut reloads.compiled),
            (Some(PACE), true, &mut reloads.compiled_paced),
            (None, false, &mut reloads.compiled_known),
        ] {
            let name = format!(
                "new{trial}{}{}",
                if pace.is_some() { "p" } else { "" },
                if cold { "" } else { "k" }
            );
            if cold {
                forget_compiled_functions(target)?;
            }
            compiled = with_custom_section(&wasm, "edgegate-load-trial", name.as_bytes());
            times.push(reload_trial(target, &name, &compiled, pace)?.0);
        }
    }
    for trial in 0..trials {
        let (added, removed) = reload_trial(target, &format!("reload{trial}"), &compiled, None)?;
        reloads.added.push(added);
        reloads.removed.push(removed);
    }
    Ok(reloads)
}

/// One trial: `wasm` as filter `name`, tagging with `name`, renamed in, then removed; the
/// times to the first response of each generation, asking with `pace` between requests.
fn reload_trial(
    target: &Target,
    name: &str,
    wasm: &[u8],
    pace: Option<Duration>,
) -> Result<(Duration, Duration)> {
    let dir = target
        .filter_dir
        .as_ref()
        .context("edgegate with filters")?;
    let path = "/api/v1/namespaces/bench/configmaps/probe";
    let tag = format!("trial-{name}-tag");
    // NAME.toml first, then the component, each written aside and renamed in.
    let part = dir.join(format!(".{name}.toml.part"));
    std::fs::write(&part, format!("[config]\ntag = \"{tag}\"\n"))?;
    std::fs::rename(&part, dir.join(format!("{name}.toml")))?;
    let part = dir.join(format!(".{name}.wasm.part"));
    std::fs::write(&part, wasm)?;
    let renamed = Instant::now();
    std::fs::rename(&part, dir.join(format!("{name}.wasm")))?;
    let added = until(renamed, pace, || {
        Ok(get(target, path, TAGGER_AGENT)?.contains(&tag))
    })
    .with_context(|| format!("{name} renamed in\n{}", target.state()))?;
    let removed = Instant::now();
    std::fs::remove_file(dir.join(format!("{name}.wasm")))?;
    let removed = until(removed, pace, || {
        Ok(!get(target, path, TAGGER_AGENT)?.contains(&tag))
    })
    .with_context(|| format!("{name} removed\n{}", target.state()))?;
    std::fs::remove_file(dir.join(format!("{name}.toml")))?;
    Ok((added, removed))
}

/// Deletes the functions the gateway compiled so far (`*.functions` in its compiled-code
/// store, `<--disk-cache-path>/_compiled-filters`), so that its next compile takes none.
fn forget_compiled_functions(target: &Target) -> Result<()> {
    let dir = target
        .filter_dir
        .as_ref()
        .and_then(|filters| filters.parent())
        .context("edgegate with filters")?
        .join("cache/_compiled-filters");
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "functions") {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// `component` with a custom section appended: the same component to the gateway, but
/// bytes (and a digest) it has not seen, so it is compiled again.
fn with_custom_section(component: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    use wasm_encoder::ComponentSection;
    let mut out = component.to_vec();
    wasm_encoder::CustomSection {
        name: name.into(),
        data: payload.into(),
    }
    .append_to_component(&mut out);
    out
}

fn until(
    since: Instant,
    pace: Option<Duration>,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<Duration> {
    while since.elapsed() < Duration::from_secs(10) {
        if done()? {
            return Ok(since.elapsed());
        }
        if let Some(pace) = pace {
            std::thread::sleep(pace);
        }
    }
    bail!("the new generation did not answer within 10 s")
}
