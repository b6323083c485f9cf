//! The watch fan-out client: `watchers` watches of the static upstream's EndpointSlice, each
//! receiving its events (1 000/s), and the delay of each event from the moment the upstream
//! wrote it (stamped in [`SENT_ANNOTATION`]) to the moment the client read it. No load tool
//! reports that, so it is this small client, run as its own process on the load CPU.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpStream;

use super::workload::{SENT_ANNOTATION, USER_AGENT, WATCH_NAMESPACE};

/// Events read in the first second are not counted: connections and the proxies' chains are
/// still warming up.
const WARM_UP: Duration = Duration::from_secs(1);

/// Delivery delays of the events all watches received, in microseconds, sorted.
pub struct Delays {
    /// The delays.
    pub micros: Vec<u64>,
    /// How long the counted part of the run lasted.
    pub counted_for: Duration,
}

impl Delays {
    /// The `q` quantile (0..=1), in microseconds.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.micros.is_empty() {
            return 0;
        }
        let index = ((self.micros.len() - 1) as f64 * q).round() as usize;
        self.micros[index.min(self.micros.len() - 1)]
    }

    /// The summary the client prints for the harness.
    pub fn summary(&self) -> serde_json::Value {
        json!({
            "events": self.micros.len(),
            "events_per_second": self.micros.len() as f64 / self.counted_for.as_secs_f64().max(1e-9),
            "p50_us": self.quantile(0.50),
            "p99_us": self.quantile(0.99),
            "max_us": self.quantile(1.0),
        })
    }
}

/// Opens `watchers` watches on `authority` (host:port) and measures for `seconds`.
pub async fn measure(authority: &str, watchers: usize, seconds: u64) -> Result<Delays> {
    let path = format!(
        "/apis/discovery.k8s.io/v1beta1/namespaces/{WATCH_NAMESPACE}/endpointslices?watch=true"
    );
    let started = Instant::now();
    let until = started + WARM_UP + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let (authority, path) = (authority.to_owned(), path.clone());
        tasks.push(tokio::spawn(async move {
            watch_one(&authority, &path, started + WARM_UP, until).await
        }));
    }
    let mut micros = Vec::new();
    for task in tasks {
        micros.extend(task.await??);
    }
    micros.sort_unstable();
    Ok(Delays {
        micros,
        counted_for: Duration::from_secs(seconds),
    })
}

async fn watch_one(
    authority: &str,
    path: &str,
    count_from: Instant,
    until: Instant,
) -> Result<Vec<u64>> {
    let stream = TcpStream::connect(authority)
        .await
        .with_context(|| format!("connecting to {authority}"))?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = http::Request::get(path)
        .header(http::header::HOST, authority)
        .header(http::header::USER_AGENT, USER_AGENT)
        .header(http::header::ACCEPT, "application/json")
        .body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    if !response.status().is_success() {
        bail!("the watch answered {}", response.status());
    }
    let mut body = response.into_body();
    let mut pending: Vec<u8> = Vec::new();
    let mut delays = Vec::new();
    let marker = format!("\"{SENT_ANNOTATION}\":\"");
    while Instant::now() < until {
        let frame = match tokio::time::timeout_at(until.into(), body.frame()).await {
            Err(_) => break,
            Ok(None) => bail!("the watch ended early"),
            Ok(Some(frame)) => frame?,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Some(sent) = sent_at(&line, marker.as_bytes()) else {
                continue;
            };
            if Instant::now() >= count_from {
                delays.push(u64::try_from(now.saturating_sub(sent) / 1_000).unwrap_or(u64::MAX));
            }
        }
    }
    Ok(delays)
}

/// The send time stamped in an event line, in nanoseconds since the epoch.
fn sent_at(line: &[u8], marker: &[u8]) -> Option<u128> {
    let start = line.windows(marker.len()).position(|w| w == marker)? + marker.len();
    let digits = line[start..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    std::str::from_utf8(&line[start..start + digits])
        .ok()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_send_stamp_of_an_event() {
        let line = br#"{"type":"MODIFIED","object":{"metadata":{"annotations":{"bench.edgegate.io/sent":"1700000000123456789"}}}}"#;
        let marker = format!("\"{SENT_ANNOTATION}\":\"");
        assert_eq!(
            sent_at(line, marker.as_bytes()),
            Some(1_700_000_000_123_456_789)
        );
        assert_eq!(sent_at(b"{}", marker.as_bytes()), None);
        let delays = Delays {
            micros: (1..=100).collect(),
            counted_for: Duration::from_secs(1),
        };
        assert_eq!((delays.quantile(0.5), delays.quantile(0.99)), (51, 99));
    }
}
