//! `edgegate-load node`: the gateway's CPU and memory while it serves a real node (kubelet,
//! kube-proxy and containerd of the node test bed, `edgegate_testkit::Testbed`) with pods,
//! Services and a steady trickle of changes from the cloud, sampled from `/proc`.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use edgegate_testkit::node::GatewayCommand;
use edgegate_testkit::process::wait_until;
use edgegate_testkit::{Testbed, Toolchain, scenario};

use crate::proc;

/// What a run does.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The edgegate binary (a release build).
    pub edgegate: std::path::PathBuf,
    /// How long the gateway is sampled, once the workload runs.
    pub duration: Duration,
    /// Time between samples.
    pub every: Duration,
    /// Pods bound to the node (half on the host's network, half on the CNI bridge).
    pub pods: usize,
    /// Services, each selecting some of the pods.
    pub services: usize,
}

/// One process's use at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// Resident memory, bytes.
    pub rss: u64,
    /// CPU time used since the process started.
    pub cpu: Duration,
    /// Open file descriptors.
    pub fds: usize,
    /// Threads.
    pub threads: u64,
}

/// One sample: the time since sampling began, the gateway's use, and what it had served.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Time since the first sample.
    pub at: Duration,
    /// The gateway.
    pub gateway: Usage,
    /// kubelet's resident memory, for scale.
    pub kubelet_rss: u64,
    /// kube-proxy's resident memory, for scale.
    pub kube_proxy_rss: u64,
    /// Requests the gateway had answered (all components, all codes).
    pub requests: f64,
    /// Bytes of responses it had sent.
    pub response_bytes: f64,
}

/// A whole run: the settings, the changes made in the cloud and the samples.
#[derive(Debug)]
pub struct Report {
    /// What was run.
    pub settings: Settings,
    /// Objects changed in the cloud while sampling (ConfigMap and Service edits).
    pub changes: usize,
    /// The samples, in order.
    pub samples: Vec<Sample>,
}

/// A process's use now, from `/proc`.
pub fn usage(pid: u32) -> Result<Usage> {
    Ok(Usage {
        rss: proc::rss(pid)?,
        cpu: proc::cpu_time(pid)?,
        fds: proc::open_fds(pid)?,
        threads: proc::status_value(pid, "Threads:")?,
    })
}

/// Brings up the node behind `settings.edgegate`, puts the workload on it, samples for
/// `settings.duration`, and tears everything down.
pub fn run(settings: &Settings) -> Result<Report> {
    let tools = Toolchain::provision()?;
    let gateway = GatewayCommand {
        program: settings.edgegate.clone(),
        args: Vec::new(),
    };
    eprintln!("edgegate-load node: starting the cloud and the node…");
    let mut bed = Testbed::start(&tools, gateway)?;
    eprintln!(
        "edgegate-load node: {} pods and {} Services…",
        settings.pods, settings.services
    );
    let names = workload(&bed, settings)?;
    let up = wait_until(Duration::from_secs(300), "the pods to run", || {
        running(&bed).is_ok_and(|running| names.iter().all(|n| running.contains(n)))
    });
    if let Err(error) = up {
        let pods = bed
            .cloud
            .kubectl(&["get", "pods", "-n", "default", "-o", "wide"])?;
        return Err(error.context(format!("{pods}\n{}", bed.node.log_tail("kubelet", 20))));
    }

    eprintln!(
        "edgegate-load node: sampling for {:?}, every {:?}…",
        settings.duration, settings.every
    );
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut changes = 0;
    while samples.is_empty() || started.elapsed() < settings.duration {
        let next = started + settings.every * samples.len() as u32;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        samples.push(sample(&bed, started.elapsed())?);
        changes += churn(&bed, samples.len(), settings.services)?;
        bed.node.check_running()?;
    }
    samples.push(sample(&bed, started.elapsed())?);
    bed.node.check_running()?;
    Ok(Report {
        settings: settings.clone(),
        changes,
        samples,
    })
}

/// The pods (sleeping busybox, each mounting the shared ConfigMap) and the Services; the
/// pods' names.
fn workload(bed: &Testbed, settings: &Settings) -> Result<Vec<String>> {
    let cluster = &bed.cloud.cluster;
    cluster.apply(&config_map(0).to_string())?;
    let mut names = Vec::new();
    for i in 0..settings.pods {
        let name = format!("load-{i}");
        let group = i % settings.services.max(1);
        cluster.apply(&pod(&name, i % 2 == 0, group).to_string())?;
        names.push(name);
    }
    for group in 0..settings.services {
        cluster.apply(&service(group, 0).to_string())?;
    }
    Ok(names)
}

/// The cloud's changes at sample `n`: the ConfigMap every sample, a Service's label every
/// other one. Returns how many objects changed.
fn churn(bed: &Testbed, n: usize, services: usize) -> Result<usize> {
    let cluster = &bed.cloud.cluster;
    cluster.apply(&config_map(n).to_string())?;
    if services > 0 && n.is_multiple_of(2) {
        cluster.apply(&service((n / 2) % services, n).to_string())?;
        return Ok(2);
    }
    Ok(1)
}

fn sample(bed: &Testbed, at: Duration) -> Result<Sample> {
    let node = &bed.node;
    let pid = |component| {
        node.pid(component)
            .with_context(|| format!("{component} is not running"))
    };
    let (status, metrics) = node.hub("/metrics")?;
    anyhow::ensure!(status == 200, "/metrics answered {status}");
    Ok(Sample {
        at,
        gateway: usage(pid("edgegate")?)?,
        kubelet_rss: proc::rss(pid("kubelet")?)?,
        kube_proxy_rss: proc::rss(pid("kube-proxy")?)?,
        requests: metric_sum(&metrics, "edgegate_requests_total"),
        response_bytes: metric_sum(&metrics, "edgegate_response_bytes_total"),
    })
}

/// The sum of a metric's series in a Prometheus text exposition.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    metric_sum_where(text, name, |_| true)
}

/// The sum of those of a metric's series whose line `keep` takes (by its labels).
pub fn metric_sum_where(text: &str, name: &str, keep: impl Fn(&str) -> bool) -> f64 {
    text.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                && keep(line)
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The names of the node's pods whose containers run.
fn running(bed: &Testbed) -> Result<Vec<String>> {
    let out = bed.cloud.kubectl(&[
        "get",
        "pods",
        "-n",
        "default",
        "--field-selector=status.phase=Running",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ])?;
    Ok(out.split_whitespace().map(str::to_owned).collect())
}

fn config_map(generation: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "load-config", "namespace": "default"},
        "data": {"generation": generation.to_string()},
    })
}

fn pod(name: &str, host_network: bool, group: usize) -> serde_json::Value {
    let mut pod = scenario::pod(name, host_network);
    pod["metadata"]["labels"]["group"] = format!("g{group}").into();
    pod["spec"]["volumes"] = serde_json::json!([
        {"name": "config", "configMap": {"name": "load-config"}}
    ]);
    pod["spec"]["containers"][0]["volumeMounts"] = serde_json::json!([
        {"name": "config", "mountPath": "/config"}
    ]);
    pod
}

fn service(group: usize, generation: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": format!("load-{group}"),
            "namespace": "default",
            "labels": {"generation": generation.to_string()},
        },
        "spec": {
            "selector": {"group": format!("g{group}")},
            "ports": [{"port": 80 + group as i32, "targetPort": 8080}],
        },
    })
}

/// The report in Markdown: the settings, a summary table and every sample.
pub fn markdown(report: &Report) -> String {
    let s = &report.settings;
    let samples = &report.samples;
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return "no samples\n".to_owned();
    };
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let wall = (last.at - first.at).as_secs_f64().max(f64::EPSILON);
    let cpu = (last.gateway.cpu - first.gateway.cpu).as_secs_f64();
    let mut rss: Vec<u64> = samples.iter().map(|x| x.gateway.rss).collect();
    rss.sort_unstable();
    let busiest = samples
        .windows(2)
        .map(|w| {
            (w[1].gateway.cpu - w[0].gateway.cpu).as_secs_f64()
                / (w[1].at - w[0].at).as_secs_f64().max(f64::EPSILON)
        })
        .fold(0.0, f64::max);
    let mut out = format!(
        "## edgegate serving a real node\n\n\
         {pods} pods, {services} Services, {changes} cloud changes over {wall:.0} s \
         (sampled every {every:?}); edgegate `{bin}`.\n\n\
         | | start | p50 | max | end |\n|---|---|---|---|---|\n\
         | gateway RSS (MiB) | {r0:.1} | {r50:.1} | {rmax:.1} | {rend:.1} |\n\
         | gateway fds | {f0} | | {fmax} | {fend} |\n\
         | gateway threads | {t0} | | {tmax} | {tend} |\n\n\
         Gateway CPU: {cpu:.2} s over {wall:.0} s = {avg:.2} % of one core on average, \
         {busy:.1} % in the busiest interval.\n\
         Requests answered: {req:.0} ({rate:.2}/s); response bytes: {bytes:.0} ({brate:.0}/s).\n\
         For scale, at the end: kubelet RSS {kl:.1} MiB, kube-proxy RSS {kp:.1} MiB.\n\n\
         | t (s) | RSS (MiB) | CPU (s) | fds | threads | requests |\n|---|---|---|---|---|---|\n",
        pods = s.pods,
        services = s.services,
        changes = report.changes,
        every = s.every,
        bin = s.edgegate.display(),
        r0 = mib(first.gateway.rss),
        r50 = mib(rss[rss.len() / 2]),
        rmax = mib(rss[rss.len() - 1]),
        rend = mib(last.gateway.rss),
        f0 = first.gateway.fds,
        fmax = samples.iter().map(|x| x.gateway.fds).max().unwrap_or(0),
        fend = last.gateway.fds,
        t0 = first.gateway.threads,
        tmax = samples.iter().map(|x| x.gateway.threads).max().unwrap_or(0),
        tend = last.gateway.threads,
        avg = 100.0 * cpu / wall,
        busy = 100.0 * busiest,
        req = last.requests - first.requests,
        rate = (last.requests - first.requests) / wall,
        bytes = last.response_bytes - first.response_bytes,
        brate = (last.response_bytes - first.response_bytes) / wall,
        kl = mib(last.kubelet_rss),
        kp = mib(last.kube_proxy_rss),
    );
    for x in samples {
        out.push_str(&format!(
            "| {:.0} | {:.1} | {:.2} | {} | {} | {:.0} |\n",
            x.at.as_secs_f64(),
            mib(x.gateway.rss),
            x.gateway.cpu.as_secs_f64(),
            x.gateway.fds,
            x.gateway.threads,
            x.requests
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_a_metric_and_no_other_with_its_prefix() {
        let text = "# HELP edgegate_requests_total x\n\
                    edgegate_requests_total{component=\"kubelet\"} 3\n\
                    edgegate_requests_total{component=\"kube-proxy\"} 4.5\n\
                    edgegate_requests_total_created 99\n\
                    edgegate_response_bytes_total 10\n";
        assert_eq!(metric_sum(text, "edgegate_requests_total"), 7.5);
        assert_eq!(metric_sum(text, "edgegate_response_bytes_total"), 10.0);
    }
}
