//! The traffic harness's report: a column per mode and the ratios of the last to each other.

use super::{Figures, Settings};

/// The figures in Markdown: a column per mode, and the ratios of the last to each other.
pub fn markdown(settings: &Settings, figures: &[Figures]) -> String {
    let kib = |b: u64| format!("{:.0}", b as f64 / 1024.0);
    let mib = |b: u64| format!("{:.1}", b as f64 / (1024.0 * 1024.0));
    type Row<'a> = (&'a str, Box<dyn Fn(&Figures) -> (String, f64) + 'a>);
    let rows: Vec<Row> = vec![
        (
            "node → cloud, warm-up (KiB)",
            Box::new(|f| (kib(f.warm_up.0), f.warm_up.0 as f64)),
        ),
        (
            "cloud → node, warm-up (KiB)",
            Box::new(|f| (kib(f.warm_up.1), f.warm_up.1 as f64)),
        ),
        (
            "node → cloud, churn (KiB)",
            Box::new(|f| (kib(f.churn.0), f.churn.0 as f64)),
        ),
        (
            "cloud → node, churn (KiB)",
            Box::new(|f| (kib(f.churn.1), f.churn.1 as f64)),
        ),
        (
            "**both ways, whole run (KiB)**",
            Box::new(|f| {
                let all = f.warm_up.0 + f.warm_up.1 + f.churn.0 + f.churn.1;
                (format!("**{}**", kib(all)), all as f64)
            }),
        ),
        (
            "both ways, churn, per second (KiB/s)",
            Box::new(|f| {
                let rate = (f.churn.0 + f.churn.1) as f64 / f.updates.1.as_secs_f64() / 1024.0;
                (format!("{rate:.1}"), rate)
            }),
        ),
        (
            "watches held for the node (end of warm-up / end / max)",
            Box::new(|f| {
                let (a, b, c) = f.watches;
                (format!("{a:.0} / {b:.0} / {c:.0}"), b)
            }),
        ),
        (
            "apiserver CPU, warm-up (s)",
            Box::new(|f| (format!("{:.2}", f.apiserver_cpu.0), f.apiserver_cpu.0)),
        ),
        (
            "apiserver CPU, churn (s)",
            Box::new(|f| (format!("{:.2}", f.apiserver_cpu.1), f.apiserver_cpu.1)),
        ),
        (
            "gateway RSS, end of warm-up / end / peak (MiB)",
            Box::new(|f| match f.gateway_rss {
                Some((idle, end, peak)) => (
                    format!("{} / {} / {}", mib(idle), mib(end), mib(peak)),
                    end as f64,
                ),
                None => ("–".to_owned(), 0.0),
            }),
        ),
        (
            "gateway RSS at the end of warm-up: anonymous / file-backed (MiB)",
            Box::new(|f| match f.gateway_rss_split {
                Some((anon, file)) => (format!("{} / {}", mib(anon), mib(file)), anon as f64),
                None => ("–".to_owned(), 0.0),
            }),
        ),
        (
            "gateway RSS at the end of the churn: anonymous / file-backed; file-backed, peak (MiB)",
            Box::new(|f| match f.gateway_rss_churn {
                Some((anon, file, peak)) => (
                    format!("{} / {}; {}", mib(anon), mib(file), mib(peak)),
                    anon as f64,
                ),
                None => ("–".to_owned(), 0.0),
            }),
        ),
        (
            "multiplexer shared state, objects / MiB",
            Box::new(|f| match f.shared_state {
                Some((objects, bytes)) => (
                    format!("{objects:.0} / {:.1}", bytes / (1024.0 * 1024.0)),
                    bytes,
                ),
                None => ("–".to_owned(), 0.0),
            }),
        ),
        (
            "cloud updates (per second)",
            Box::new(|f| {
                let rate = f.updates.0 as f64 / f.updates.1.as_secs_f64();
                (format!("{} ({rate:.1}/s)", f.updates.0), rate)
            }),
        ),
    ];
    // The last mode against each earlier one.
    let earlier = &figures[..figures.len().saturating_sub(1)];
    let mut out = format!(
        "## Cloud–edge traffic of a node workload\n\n\
         {n} Services and {n} EndpointSlices (5–20 endpoints each); kubelet, kube-proxy and five \
         simulated agents (coredns, a CNI agent, three DaemonSets), each agent listing and \
         watching Services, EndpointSlices and Nodes; warm-up {warm:?} (no churn), then \
         {churn} updates/s for {secs:?}; edgegate `{bin}`{filed}, each run with an empty cache.\n\n| |",
        n = settings.services,
        warm = settings.warm_up,
        churn = settings.churn,
        secs = settings.duration,
        bin = [settings.edgegate.display().to_string()]
            .into_iter()
            .chain(settings.gateway_flags.iter().cloned())
            .collect::<Vec<_>>()
            .join(" "),
        filed = match &settings.filed_edgegate {
            Some(path) => format!("; filed: `{}`", path.display()),
            None => String::new(),
        },
    );
    for f in figures {
        out.push_str(&format!(" {:?} |", f.mode));
    }
    if let Some(last) = figures.last() {
        for f in earlier {
            out.push_str(&format!(" {:?} / {:?} |", last.mode, f.mode));
        }
    }
    out.push_str(&format!(
        "\n|---|{}\n",
        "---|".repeat(figures.len() + earlier.len())
    ));
    for (name, cell) in &rows {
        out.push_str(&format!("| {name} |"));
        let cells: Vec<(String, f64)> = figures.iter().map(cell).collect();
        for (text, _) in &cells {
            out.push_str(&format!(" {text} |"));
        }
        if let Some(last) = cells.last() {
            for before in &cells[..earlier.len()] {
                if before.1 > 0.0 {
                    out.push_str(&format!(" {:.2} × |", last.1 / before.1));
                } else {
                    out.push_str(" |");
                }
            }
        }
        out.push('\n');
    }
    out.push_str("\nThe agents' counters at the end, and the watches of the baseline:\n\n");
    for f in figures {
        out.push_str(&format!(
            "- {:?}: {}; baseline {:.0} watches\n",
            f.mode, f.agents, f.baseline_watches
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::super::Mode;
    use super::*;

    #[test]
    fn the_report_has_a_column_per_mode_and_their_ratio() {
        let figures = |mode, down| Figures {
            mode,
            warm_up: (0, down),
            churn: (0, 0),
            apiserver_cpu: (1.0, 1.0),
            watches: (1.0, 1.0, 1.0),
            baseline_watches: 0.0,
            updates: (1, Duration::from_secs(1)),
            gateway_rss: None,
            gateway_rss_split: None,
            gateway_rss_churn: None,
            shared_state: None,
            agents: String::new(),
        };
        let settings = Settings {
            edgegate: PathBuf::from("edgegate"),
            filed_edgegate: None,
            gateway_flags: Vec::new(),
            modes: vec![Mode::Direct, Mode::Edgegate],
            services: 1,
            churn: 1,
            warm_up: Duration::from_secs(1),
            duration: Duration::from_secs(1),
        };
        let report = markdown(
            &settings,
            &[figures(Mode::Direct, 1024), figures(Mode::Edgegate, 4096)],
        );
        assert!(report.contains("| | Direct | Edgegate | Edgegate / Direct |"));
        assert!(report.contains("| cloud → node, warm-up (KiB) | 1 | 4 | 4.00 × |"));
        let three = markdown(
            &settings,
            &[
                figures(Mode::Direct, 1024),
                figures(Mode::Edgegate, 8192),
                figures(Mode::Multiplexer, 512),
            ],
        );
        assert!(three.contains(
            "| | Direct | Edgegate | Multiplexer | Multiplexer / Direct | Multiplexer / Edgegate |"
        ));
        assert!(three.contains("| cloud → node, warm-up (KiB) | 1 | 8 | 0 | 0.50 × | 0.06 × |"));
    }
}
