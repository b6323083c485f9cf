//! What the filter host runs with: [`FilterSettings`] (where filters come from), the
//! per-call [`Limits`] and the [`OnError`] policy a filter's failures follow.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where the filters come from and what they run with.
#[derive(Clone, Debug)]
pub struct FilterSettings {
    /// The watched filter directory; `None` serves an empty chain.
    pub dir: Option<PathBuf>,
    /// The gateway-level filter config file (also watched).
    pub config_file: Option<PathBuf>,
    /// Where compiled code is kept (outside the watched directory).
    pub compiled_cache_dir: PathBuf,
    /// The `edgegate` binary whose `filter compile` and `filter check-config` compile new
    /// filters and check their configs in a child process, so the memory that work leaves
    /// behind goes with it; `None` does both in this process.
    pub helper: Option<PathBuf>,
    /// Called on the loading thread after each load, succeeded or failed (see
    /// [`crate::server::Hooks::return_freed_memory`]).
    pub after_load: Option<fn()>,
    /// This node's name, given to filters.
    pub node_name: String,
    /// This node's pool, given to filters.
    pub node_pool: Option<String>,
    /// Limits of filters whose `NAME.toml` sets none.
    pub limits: Limits,
    /// How long the directory must be quiet before it is rescanned.
    pub debounce: Duration,
    /// Filters the command line turns off, over what the config file says (`*`: all);
    /// `-` and `_` in names are ignored, so YurtHub's names match.
    pub disabled: Vec<String>,
}

/// Collapses the bursts of events one copy, rename or ConfigMap swap makes (they come
/// within milliseconds), and leaves most of the one-second reload budget to compiling.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(100);

/// The compiled-code store's folder under `--disk-cache-path`; the underscore keeps it apart
/// from the per-component folders of the object cache.
pub const COMPILED_CACHE_DIR: &str = "_compiled-filters";

/// What happens to an object when a filter fails on it (trap, deadline, memory, oversized
/// or malformed output, no instance).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Pass the object on as this filter received it (fail-open).
    #[default]
    Keep,
    /// Leave the object out.
    Drop,
    /// End the response with a `Status` 500 (fail-closed).
    Fail,
}

/// When a filter that keeps failing is turned off (`[disable-after]` of its `NAME.toml`):
/// at its `failures`-th failure within `window`. Each failure already gets the filter a fresh
/// instance; once turned off it is no longer called, and its `on-error` policy applies to
/// every object it would have judged, until its files change and it is loaded again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct DisableAfter {
    /// Failures (traps, limits exceeded, bad output) that turn it off.
    pub failures: u32,
    /// Within how long.
    #[serde(rename = "windowSeconds", serialize_with = "seconds")]
    pub window: Duration,
}

fn seconds<S: serde::Serializer>(window: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(window.as_secs())
}

/// Per-call limits of a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Limits {
    /// Cap of the instance's linear memory, in bytes.
    pub memory: usize,
    /// Longest one call may run (a batch gets this per object).
    pub deadline: Duration,
    /// Largest replacement a call may return, in bytes.
    pub max_output: usize,
}

impl Default for Limits {
    /// 64 MiB holds a JSON parse of the largest object etcd stores (1.5 MiB) many times
    /// over; 100 ms is far beyond what a JSON edit of one object takes, yet bounds what a
    /// runaway filter costs; 3 MiB is kube-apiserver's own request body limit.
    fn default() -> Self {
        Limits {
            memory: 64 << 20,
            deadline: Duration::from_millis(100),
            max_output: 3 << 20,
        }
    }
}
