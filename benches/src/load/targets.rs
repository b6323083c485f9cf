//! What the load is driven against: the upstream directly, edgegate without filters,
//! edgegate with the three seed filters, and the Go comparator. Each proxy runs pinned to
//! [`PROXY_CPU`] (`taskset`), so it never competes with the load generator for a core.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use edgegate_testkit::http;
use edgegate_testkit::process::{Process, free_port, wait_until};

use super::workload::PROXY_CPU;
use crate::fixtures::NODE;

/// The seed filters target (c) loads.
pub const SEED_FILTERS: [&str; 3] = ["servicetopology", "masterservice", "discard-cloud-service"];

/// The binaries and components a run uses.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// The `edgegate` release binary.
    pub edgegate: PathBuf,
    /// The Go comparator.
    pub goproxy: PathBuf,
    /// The directory of built filter components (`NAME.wasm`).
    pub filters: PathBuf,
    /// Flags edgegate targets get after the harness's own (e.g. `--upstream-http2`).
    pub gateway_flags: Vec<String>,
}

/// The upstream the targets forward to.
#[derive(Clone, Debug)]
pub struct Upstream {
    /// Its name in the report.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// The gateway's identity (a kubeconfig), if the upstream checks one.
    pub kubeconfig: Option<PathBuf>,
    /// The CA of its serving certificate, for https.
    pub ca: Option<PathBuf>,
    /// The bearer token every request carries, if the upstream wants one.
    pub token: Option<String>,
}

/// What a workload is driven against.
pub struct Target {
    /// Its name in the report.
    pub name: &'static str,
    /// The URL requests go to.
    pub url: String,
    /// edgegate's hub server, for edgegate targets.
    pub hub: Option<SocketAddr>,
    /// The filter directory, for edgegate with filters.
    pub filter_dir: Option<PathBuf>,
    process: Option<Process>,
}

impl Target {
    /// The upstream itself.
    pub fn direct(upstream: &Upstream) -> Target {
        Target {
            name: "direct",
            url: upstream.url.clone(),
            hub: None,
            filter_dir: None,
            process: None,
        }
    }

    /// The proxy's process id (none for the upstream itself).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Process::pid)
    }

    /// `host:port` of the URL.
    pub fn authority(&self) -> &str {
        let rest = self.url.split_once("://").map_or(&*self.url, |(_, r)| r);
        rest.trim_end_matches('/')
    }

    /// edgegate on `upstream`, with the seed filters if `filters`.
    pub fn edgegate(
        bins: &Binaries,
        upstream: &Upstream,
        filters: bool,
        scratch: &Path,
    ) -> Result<Target> {
        let name = if filters {
            "edgegate+3 filters"
        } else {
            "edgegate"
        };
        let dir = scratch.join(if filters {
            "edgegate-filters"
        } else {
            "edgegate"
        });
        std::fs::create_dir_all(&dir)?;
        let (proxy, hub) = (free_port()?, free_port()?);
        let mut args = vec![
            "-c".to_owned(),
            PROXY_CPU.to_owned(),
            bins.edgegate.display().to_string(),
            format!("--server-addr={}", upstream.url),
            format!("--proxy-port={proxy}"),
            format!("--serve-port={hub}"),
            format!("--disk-cache-path={}", dir.join("cache").display()),
            format!("--node-name={NODE}"),
            "--log-level=warn".to_owned(),
        ];
        if let Some(kubeconfig) = &upstream.kubeconfig {
            args.push(format!("--kubeconfig={}", kubeconfig.display()));
        }
        args.extend(bins.gateway_flags.iter().cloned());
        let filter_dir = if filters {
            let filter_dir = dir.join("filters");
            std::fs::create_dir_all(&filter_dir)?;
            for name in SEED_FILTERS {
                let file = format!("{name}.wasm");
                std::fs::copy(bins.filters.join(&file), filter_dir.join(&file))
                    .with_context(|| format!("copying {file}"))?;
            }
            args.push(format!("--filter-dir={}", filter_dir.display()));
            Some(filter_dir)
        } else {
            None
        };
        let process = Process::spawn(name, Path::new("/usr/bin/taskset"), &args, &dir.join("log"))?;
        let hub_addr = SocketAddr::from(([127, 0, 0, 1], hub));
        let mut target = Target {
            name,
            url: format!("http://127.0.0.1:{proxy}"),
            hub: Some(hub_addr),
            filter_dir,
            process: Some(process),
        };
        let wanted = if filters { SEED_FILTERS.len() } else { 0 };
        let ready = wait_until(Duration::from_secs(60), "edgegate ready", || {
            let ready = http::get(hub_addr, "/v1/readyz").is_ok_and(|r| r.status == 200);
            ready && target.live_filters().is_ok_and(|n| n == wanted)
        });
        if let Err(error) = ready
            && let Some(process) = target.process.as_mut()
        {
            process.check_running()?;
            return Err(error.context(process.log_tail(20)));
        }
        // The informers behind filter lookups list and watch through the gateway itself.
        std::thread::sleep(Duration::from_secs(2));
        Ok(target)
    }

    /// How many filters the gateway serves now.
    pub fn live_filters(&self) -> Result<usize> {
        let hub = self.hub.context("not edgegate")?;
        let chain: serde_json::Value = serde_json::from_str(&http::get(hub, "/v1/filters")?.body)?;
        Ok(chain["filters"].as_array().map_or(0, Vec::len))
    }

    /// What edgegate says of itself, for an error: its chain (`/v1/filters`, with the last
    /// load failure), the filter directory's listing and the tail of its log.
    pub fn state(&self) -> String {
        let chain = match self.hub.map(|hub| http::get(hub, "/v1/filters")) {
            Some(Ok(reply)) => reply.body,
            Some(Err(error)) => format!("(no answer: {error:#})"),
            None => "(not edgegate)".to_owned(),
        };
        let listing = self.filter_dir.as_ref().map_or_else(String::new, |dir| {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names.join(" ")
        });
        let log = self
            .process
            .as_ref()
            .map(|p| p.log_tail(30))
            .unwrap_or_default();
        format!("chain: {chain}\nfilter directory: {listing}\nlog tail:\n{log}")
    }

    /// A counter or gauge of edgegate's `/metrics` (summed over its label sets).
    pub fn metric(&self, name: &str) -> Result<f64> {
        let hub = self.hub.context("not edgegate")?;
        let text = http::get(hub, "/metrics")?.body;
        Ok(text
            .lines()
            .filter(|l| l.starts_with(name) && !l.starts_with('#'))
            .filter(|l| l[name.len()..].starts_with([' ', '{']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }

    /// The Go comparator on `upstream`.
    pub fn go(bins: &Binaries, upstream: &Upstream, scratch: &Path) -> Result<Target> {
        let dir = scratch.join("goproxy");
        std::fs::create_dir_all(dir.join("cache"))?;
        let port = free_port()?;
        let mut args = vec![
            "-c".to_owned(),
            PROXY_CPU.to_owned(),
            bins.goproxy.display().to_string(),
            format!("-listen=127.0.0.1:{port}"),
            format!("-upstream={}", upstream.url),
            format!("-cache-dir={}", dir.join("cache").display()),
        ];
        if let Some(ca) = &upstream.ca {
            args.push(format!("-ca={}", ca.display()));
        }
        let mut process = Process::spawn(
            "go reverse proxy",
            Path::new("/usr/bin/taskset"),
            &args,
            &dir.join("log"),
        )?;
        let up = wait_until(Duration::from_secs(30), "the Go proxy", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        if let Err(error) = up {
            process.check_running()?;
            return Err(error);
        }
        Ok(Target {
            name: "Go ReverseProxy+tee",
            url: format!("http://127.0.0.1:{port}"),
            hub: None,
            filter_dir: None,
            process: Some(process),
        })
    }
}
