//! The workloads, the same for every target: a small GET at fixed concurrency (for
//! throughput) and one at a time (for latency), LISTs of 1 000 and 10 000 EndpointSlices,
//! driven by `wrk` pinned to the load CPU; and what `wrk` reports.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The namespaces holding the lists, and how many EndpointSlices each holds.
pub const LIST_NAMESPACES: [(&str, usize); 2] = [("list-1000", 1_000), ("list-10000", 10_000)];
/// The namespace of the watched EndpointSlice.
pub const WATCH_NAMESPACE: &str = "watch";
/// The annotation in which the static upstream stamps when it wrote a watch event.
pub const SENT_ANNOTATION: &str = "bench.edgegate.io/sent";
/// Who asks: kube-proxy is a cache agent (its answers are teed to the cache) and the client
/// servicetopology and discard-cloud-service filter for.
pub const USER_AGENT: &str = "kube-proxy/v1.20.2 (linux/amd64) kubernetes/faecb19";
/// The CPU the load generators run on; proxies run on the other one.
pub const LOAD_CPU: &str = "0";
/// The CPU the proxy under test runs on.
pub const PROXY_CPU: &str = "1";

/// One `wrk` workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Its name in the report.
    pub name: &'static str,
    /// The request path and query.
    pub path: String,
    /// Open connections.
    pub connections: u32,
}

/// The `wrk` workloads of a run against an upstream; `slices_api` is the EndpointSlice API
/// path (`/apis/discovery.k8s.io/v1beta1`).
pub fn workloads(slices_api: &str) -> Vec<Workload> {
    let small = "/api/v1/namespaces/bench/configmaps/small".to_owned();
    let list = |ns: &str| format!("{slices_api}/namespaces/{ns}/endpointslices");
    vec![
        Workload {
            name: "small GET, 16 connections",
            path: small.clone(),
            connections: 16,
        },
        Workload {
            name: "small GET, 1 connection",
            path: small,
            connections: 1,
        },
        Workload {
            name: "LIST 1 000 slices, 4 connections",
            path: list(LIST_NAMESPACES[0].0),
            connections: 4,
        },
        Workload {
            name: "LIST 10 000 slices, 2 connections",
            path: list(LIST_NAMESPACES[1].0),
            connections: 2,
        },
    ]
}

/// What `wrk` measured.
#[derive(Clone, Debug, Default)]
pub struct WrkResult {
    /// Requests per second.
    pub requests_per_second: f64,
    /// Response bytes per second.
    pub bytes_per_second: f64,
    /// Median latency.
    pub p50: Duration,
    /// 99th percentile latency.
    pub p99: Duration,
    /// Requests that failed (non-2xx/3xx, socket errors, timeouts).
    pub errors: u64,
}

/// Runs `wrk` on `base` + `workload.path` for `seconds`, pinned to [`LOAD_CPU`].
pub fn run_wrk(
    base: &str,
    workload: &Workload,
    seconds: u64,
    authorization: Option<&str>,
) -> Result<WrkResult> {
    let mut command = Command::new("taskset");
    command
        .args([
            "-c",
            LOAD_CPU,
            "wrk",
            "-t1",
            "--latency",
            "--timeout",
            "10s",
        ])
        .arg(format!("-c{}", workload.connections))
        .arg(format!("-d{seconds}s"))
        .args(["-H", &format!("User-Agent: {USER_AGENT}")])
        .args(["-H", "Accept: application/json"]);
    if let Some(token) = authorization {
        command.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    let output = command
        .arg(format!("{base}{}", workload.path))
        .output()
        .context("running wrk (apt-get install wrk)")?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "wrk failed: {}{}",
            text,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    parse_wrk(&text).with_context(|| format!("reading wrk's report:\n{text}"))
}

/// Reads `wrk --latency`'s report.
pub fn parse_wrk(text: &str) -> Result<WrkResult> {
    let mut result = WrkResult::default();
    for line in text.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("50%"), Some(value)) => result.p50 = duration(value)?,
            (Some("99%"), Some(value)) => result.p99 = duration(value)?,
            (Some("Requests/sec:"), Some(value)) => result.requests_per_second = value.parse()?,
            (Some("Transfer/sec:"), Some(value)) => result.bytes_per_second = bytes(value)?,
            (Some("Non-2xx"), _) => result.errors += last_number(line)?,
            (Some("Socket"), _) => {
                for part in line.split(',') {
                    result.errors += last_number(part)?;
                }
            }
            _ => {}
        }
    }
    if result.requests_per_second == 0.0 {
        bail!("no requests completed");
    }
    Ok(result)
}

fn last_number(text: &str) -> Result<u64> {
    Ok(text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .next_back()
        .unwrap_or(0))
}

/// `123.45us`, `1.20ms`, `2.00s`, `1.00m`.
fn duration(text: &str) -> Result<Duration> {
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .context("a unit")?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse()?;
    let seconds = match unit {
        "us" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        _ => bail!("unknown unit {unit}"),
    };
    Ok(Duration::from_secs_f64(seconds))
}

/// `512.00KB`, `1.23MB`, `2.00GB`, `100.00B`.
fn bytes(text: &str) -> Result<f64> {
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .context("a unit")?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse()?;
    let scale = match unit {
        "B" => 1.0,
        "KB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        _ => bail!("unknown unit {unit}"),
    };
    Ok(value * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_wrk_report() {
        let text = "Running 2s test @ http://127.0.0.1:1/x
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    60.12us   10.00us   1.00ms   90.00%
  Latency Distribution
     50%   58.00us
     75%   62.00us
     90%   70.00us
     99%    1.10ms
  30000 requests in 2.00s, 12.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 5
Requests/sec:  15000.50
Transfer/sec:      6.00MB
";
        let result = parse_wrk(text).unwrap();
        assert_eq!(result.p50, Duration::from_micros(58));
        assert_eq!(result.p99, Duration::from_micros(1100));
        assert_eq!(result.errors, 8);
        assert!((result.requests_per_second - 15000.5).abs() < 1e-9);
        assert!((result.bytes_per_second - 6.0 * 1024.0 * 1024.0).abs() < 1.0);
    }
}
