//! One workload against one target, with what the proxy process spent on it: CPU time
//! (utime + stime) and peak RSS (`VmHWM`, reset before the workload).

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

use super::targets::Target;
use super::workload::{LOAD_CPU, WrkResult};
use crate::proc;

/// What the proxy process spent during a workload (nothing for the upstream itself).
#[derive(Clone, Copy, Debug, Default)]
pub struct Spent {
    /// CPU time.
    pub cpu: Duration,
    /// Peak resident memory.
    pub peak_rss: u64,
}

/// Runs `work`, measuring what the target's process spent on it.
pub fn spent<T>(target: &Target, work: impl FnOnce() -> Result<T>) -> Result<(T, Option<Spent>)> {
    let Some(pid) = target.pid() else {
        return Ok((work()?, None));
    };
    proc::reset_peak(pid)?;
    let before = proc::cpu_time(pid)?;
    let result = work()?;
    let spent = Spent {
        cpu: proc::cpu_time(pid)?.saturating_sub(before),
        peak_rss: proc::peak_rss(pid)?,
    };
    Ok((result, Some(spent)))
}

/// One wrk workload's figures for one target.
#[derive(Clone, Debug)]
pub struct WrkRow {
    /// The target.
    pub target: &'static str,
    /// What wrk measured.
    pub wrk: WrkResult,
    /// What the proxy spent.
    pub spent: Option<Spent>,
    /// How long the workload ran.
    pub seconds: u64,
}

impl WrkRow {
    /// Proxy CPU per request, in microseconds.
    pub fn cpu_per_request_us(&self) -> Option<f64> {
        let requests = self.wrk.requests_per_second * self.seconds as f64;
        self.spent
            .map(|s| s.cpu.as_secs_f64() * 1e6 / requests.max(1.0))
    }
}

/// The watch client's figures for one target.
#[derive(Clone, Debug)]
pub struct WatchRow {
    /// The target.
    pub target: &'static str,
    /// Events received per second, all watches together.
    pub events_per_second: f64,
    /// Median delivery delay.
    pub p50: Duration,
    /// 99th percentile delivery delay.
    pub p99: Duration,
    /// Largest delivery delay.
    pub max: Duration,
    /// What the proxy spent.
    pub spent: Option<Spent>,
}

/// Runs the watch client (this binary, `watch-client`) pinned to the load CPU.
pub fn watch_client(target: &Target, watchers: usize, seconds: u64) -> Result<WatchRow> {
    let exe = std::env::current_exe()?;
    let (summary, spent) = spent(target, || {
        let output = std::process::Command::new("taskset")
            .args(["-c", LOAD_CPU])
            .arg(&exe)
            .args(["watch-client", "--authority", target.authority()])
            .args(["--watchers", &watchers.to_string()])
            .args(["--seconds", &seconds.to_string()])
            .output()
            .context("running the watch client")?;
        anyhow::ensure!(
            output.status.success(),
            "the watch client failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(serde_json::from_slice::<Value>(&output.stdout)?)
    })?;
    let micros = |key: &str| Duration::from_micros(summary[key].as_u64().unwrap_or(0));
    Ok(WatchRow {
        target: target.name,
        events_per_second: summary["events_per_second"].as_f64().unwrap_or(0.0),
        p50: micros("p50_us"),
        p99: micros("p99_us"),
        max: micros("max_us"),
        spent,
    })
}
