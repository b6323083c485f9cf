//! Wasm filters in the response stream of a real kube-apiserver: hostile filters
//! (`hostile`), hot reload under load (`reload`), watch visibility (`watch`), streaming
//! memory through a chain and the perf map of filter code (`memory`), and kill -9 while
//! filters compile and reload (`crash`), a filter turned off for failing again and again
//! (`tripwire`). This file holds what
//! they share: the filter directory of a gateway and its live chain.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{Gateway, http, process::wait_until};

use crate::support::{
    Env, Watch, client, create_configmaps, get_as, list_as, list_json_as, metric, metric_sample,
    names, namespace, runtime, wait_readyz,
};

mod crash;
mod hostile;
mod memory;
mod reload;
mod tripwire;
mod watch;

pub use crash::kill_nine_while_filters_compile_leaves_the_code_store_whole;
pub use hostile::hostile_filters_never_stop_the_service;
pub use memory::{
    a_large_list_streams_in_bounded_memory, a_perf_map_names_the_filters_code,
    instances_made_on_demand_fit_a_small_address_space,
};
pub use reload::hot_reload_under_load;
pub use tripwire::a_filter_failing_again_and_again_is_reloaded_then_turned_off;
pub use watch::watch_follows_the_visibility_rule;

/// The component the test filters apply to.
const TEST: &str = "test/v1";
/// A component no test filter applies to: "the other clients".
const OTHER: &str = "kubelet/v1.20.2";

/// The filter directory of one gateway.
struct FilterDir {
    path: PathBuf,
    built: PathBuf,
}

impl FilterDir {
    fn new(under: &Path) -> Result<FilterDir> {
        let path = under.join("filters");
        std::fs::create_dir_all(&path)?;
        let built = edgegate_testkit::filters::built(&[
            "looper",
            "membomb",
            "trapper",
            "bloater",
            "tagger",
            "nodestamp",
        ])?;
        Ok(FilterDir { path, built })
    }

    /// Writes `name.toml`, then renames `component.wasm` in as `name.wasm`, as a careful
    /// operator (or a ConfigMap mount) does; returns the moment of the rename.
    fn install(&self, name: &str, component: &str, toml: &str) -> Result<Instant> {
        let bytes = std::fs::read(self.built.join(format!("{component}.wasm")))?;
        self.install_bytes(name, &bytes, toml)
    }

    /// As [`FilterDir::install`], with the component's bytes given.
    fn install_bytes(&self, name: &str, wasm: &[u8], toml: &str) -> Result<Instant> {
        self.write(&format!("{name}.toml"), toml.as_bytes())?;
        self.write(&format!("{name}.wasm"), wasm)
    }

    fn write(&self, file: &str, bytes: &[u8]) -> Result<Instant> {
        let part = self.path.join(format!(".{file}.part"));
        std::fs::write(&part, bytes)?;
        std::fs::rename(&part, self.path.join(file))?;
        Ok(Instant::now())
    }

    fn remove(&self, name: &str) -> Result<Instant> {
        std::fs::remove_file(self.path.join(format!("{name}.wasm")))?;
        let _ = std::fs::remove_file(self.path.join(format!("{name}.toml")));
        Ok(Instant::now())
    }

    fn flag(&self) -> String {
        format!("--filter-dir={}", self.path.display())
    }
}

/// The gateway's live chain (`GET /v1/filters`).
fn chain(gateway: &Gateway) -> Result<serde_json::Value> {
    Ok(serde_json::from_str(
        &http::get(gateway.hub, "/v1/filters")?.body,
    )?)
}

fn generation(gateway: &Gateway) -> Result<u64> {
    chain(gateway)?["generation"]
        .as_u64()
        .context("a generation number")
}

/// Waits for a generation after `previous`; returns it and how long after `since` it was seen.
fn next_generation(gateway: &Gateway, previous: u64, since: Instant) -> Result<(u64, Duration)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = generation(gateway)?;
        if now > previous {
            return Ok((now, since.elapsed()));
        }
        ensure!(
            Instant::now() < deadline,
            "no generation after {previous} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn loaded(gateway: &Gateway, name: &str) -> Result<bool> {
    Ok(chain(gateway)?["filters"]
        .as_array()
        .is_some_and(|filters| filters.iter().any(|f| f["name"] == name)))
}

/// Installs a filter and waits until the gateway serves it.
fn activate(
    gateway: &Gateway,
    dir: &FilterDir,
    name: &str,
    component: &str,
    toml: &str,
) -> Result<()> {
    let before = generation(gateway)?;
    let at = dir.install(name, component, toml)?;
    next_generation(gateway, before, at)?;
    wait_until(Duration::from_secs(10), "the filter to load", || {
        loaded(gateway, name).unwrap_or(false)
    })
}

fn deactivate(gateway: &Gateway, dir: &FilterDir, name: &str) -> Result<()> {
    dir.remove(name)?;
    wait_until(Duration::from_secs(10), "the filter to go", || {
        !loaded(gateway, name).unwrap_or(true)
    })
}
