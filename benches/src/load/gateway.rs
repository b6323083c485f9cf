//! One gateway, no filters, in front of a kube-apiserver that is already running
//! (`edgegate-load apiserver`), with flags of the caller's: the apiserver workloads through
//! it while watches are held open, as a node holds them, and per workload its CPU per
//! request, wrk's latency and its connections to the apiserver. Short and self-contained,
//! so that two settings can be run in turns (`edgegate-load gateway --gateway-flag=…`).

use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use super::measure::{WrkRow, spent};
use super::run::SLICES_API;
use super::targets::{Binaries, Target, Upstream};
use super::workload::{run_wrk, workloads};
use crate::proc;

/// What a run does.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The edgegate binary and the flags it gets.
    pub bins: Binaries,
    /// The running apiserver, as `edgegate-load apiserver` printed it.
    pub upstream: Upstream,
    /// Its process, for its CPU time, when given.
    pub apiserver_pid: Option<u32>,
    /// Seconds each workload runs.
    pub seconds: u64,
    /// Watches held open through the gateway while the workloads run.
    pub watches: usize,
    /// How many of the apiserver workloads run, in their order (small GET 16 connections,
    /// small GET 1 connection, LIST 1 000, LIST 10 000).
    pub workloads: usize,
    /// Scratch space.
    pub scratch: PathBuf,
}

/// One workload's figures.
pub struct Row {
    /// The workload and what the gateway spent on it.
    pub wrk: WrkRow,
    /// The name of the workload.
    pub workload: &'static str,
    /// The apiserver's CPU per request, in microseconds, when its process is known.
    pub apiserver_us: Option<f64>,
    /// The gateway's established connections to the apiserver at the workload's end.
    pub connections: usize,
}

/// Runs the workloads through a gateway started for them.
pub fn run(settings: &Settings) -> Result<Vec<Row>> {
    let target = Target::edgegate(&settings.bins, &settings.upstream, false, &settings.scratch)?;
    let pid = target.pid().context("the gateway runs")?;
    let port = port_of(&settings.upstream.url)?;
    let token = settings.upstream.token.as_deref();
    let _watches = (0..settings.watches)
        .map(|_| hold_watch(target.authority(), token))
        .collect::<Result<Vec<_>>>()?;
    let mut rows = Vec::new();
    for workload in workloads(SLICES_API).into_iter().take(settings.workloads) {
        let apiserver_before = settings.apiserver_pid.map(proc::cpu_time).transpose()?;
        let (wrk, spent) = spent(&target, || {
            run_wrk(&target.url, &workload, settings.seconds, token)
        })?;
        let wrk = WrkRow {
            target: target.name,
            wrk,
            spent,
            seconds: settings.seconds,
        };
        let requests = wrk.wrk.requests_per_second * settings.seconds as f64;
        let apiserver_us = match (settings.apiserver_pid, apiserver_before) {
            (Some(pid), Some(before)) => {
                let used = proc::cpu_time(pid)?.saturating_sub(before);
                Some(used.as_secs_f64() * 1e6 / requests.max(1.0))
            }
            _ => None,
        };
        rows.push(Row {
            wrk,
            workload: workload.name,
            apiserver_us,
            connections: edgegate_testkit::sockets::connections_to(pid, port)?,
        });
    }
    Ok(rows)
}

/// The rows as Markdown, headed by the gateway's flags.
pub fn markdown(settings: &Settings, rows: &[Row]) -> String {
    let flags = settings.bins.gateway_flags.join(" ");
    let mut text = format!(
        "gateway flags: `{flags}`; {} watches held; {} s a workload\n\n\
         | workload | requests/s | p50 | p99 | errors | gateway CPU/request | apiserver CPU/request | upstream connections |\n\
         |---|---|---|---|---|---|---|---|\n",
        settings.watches, settings.seconds
    );
    for row in rows {
        let micros = |us: Option<f64>| us.map_or("–".to_owned(), |us| format!("{us:.1} µs"));
        text.push_str(&format!(
            "| {} | {:.0} | {:.0} µs | {:.0} µs | {} | {} | {} | {} |\n",
            row.workload,
            row.wrk.wrk.requests_per_second,
            row.wrk.wrk.p50.as_secs_f64() * 1e6,
            row.wrk.wrk.p99.as_secs_f64() * 1e6,
            row.wrk.wrk.errors,
            micros(row.wrk.cpu_per_request_us()),
            micros(row.apiserver_us),
            row.connections,
        ));
    }
    text
}

/// A watch through the gateway at `authority`, its head read, held open until dropped.
fn hold_watch(authority: &str, token: Option<&str>) -> Result<TcpStream> {
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET /api/v1/namespaces/bench/configmaps?watch=true HTTP/1.1\r\nHost: gateway\r\n\
         User-Agent: {}\r\nAccept: application/json\r\n{authorization}\r\n",
        super::workload::USER_AGENT
    )?;
    let head = edgegate_testkit::http::read_head(&mut stream)?;
    ensure!(head.starts_with("HTTP/1.1 200"), "a watch: {head}");
    Ok(stream)
}

/// The port of `url` (`https://host:port`).
fn port_of(url: &str) -> Result<u16> {
    let port = url
        .rsplit_once(':')
        .map(|(_, port)| port.trim_end_matches('/'));
    Ok(port.context("a port in the URL")?.parse()?)
}
