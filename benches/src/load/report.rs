//! The run's report as Markdown: per upstream and workload, each target's throughput and
//! latency with its ratios to direct and to the Go comparator, and the proxy's CPU and peak
//! RSS; then the watch fan-out, memory and hot reload.

use std::fmt::Write;
use std::time::Duration;

use super::measure::{WatchRow, WrkRow};
use super::run::{Report, Settings};
use crate::load::targets::SEED_FILTERS;

const GO: &str = "Go ReverseProxy+tee";

fn mb(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1e6)
}

fn us(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e6)
}

/// `a − b` in µs, signed.
fn added(a: Duration, b: Duration) -> String {
    format!("{:+.0}", (a.as_secs_f64() - b.as_secs_f64()) * 1e6)
}

fn ratio(a: f64, b: Option<f64>) -> String {
    match b {
        Some(b) if b > 0.0 => format!("{:.2}", a / b),
        _ => "–".to_owned(),
    }
}

/// The report, in Markdown.
pub fn markdown(report: &Report, settings: &Settings) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Each wrk workload ran {} s per target (wrk -t1, pinned to CPU 0; proxies pinned to CPU 1; the upstream on both). \"added\" = target − direct, at the same percentile. CPU and peak RSS are the proxy process's (utime+stime; VmHWM reset before each workload). Seed filters: {}.\n",
        settings.seconds,
        SEED_FILTERS.join(", ")
    );
    for part in &report.upstreams {
        let _ = writeln!(out, "### {}\n", part.upstream);
        for (name, rows) in &part.workloads {
            wrk_table(&mut out, name, rows);
        }
        if !part.watch.is_empty() {
            watch_table(&mut out, &part.watch, settings);
        }
        for (when, idle) in [
            ("start", &part.idle),
            ("the workloads, 10 s idle", &part.idle_after),
        ] {
            let _ = writeln!(
                out,
                "Idle RSS after {when} (MB): {}.\n",
                idle.iter()
                    .map(|(t, b)| format!("{t} {}", mb(*b)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = writeln!(
            out,
            "Cache after the workloads (lists committed / lists not committed): {}.\n",
            part.cache
                .iter()
                .map(|(t, c, a)| format!("{t} {c} / {a}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !report.growth.is_empty() {
        let _ = writeln!(
            out,
            "### Memory: a 10 000-object LIST through 3 filters and the cache (edgegate+3 filters, static upstream)\n"
        );
        let _ = writeln!(
            out,
            "| list | body MB | largest item B | RSS before MB | peak MB | growth MB | goal (2 × largest + 8 MB) | after: anon ± MB | after: file ± MB | committed |\n|---|---|---|---|---|---|---|---|---|---|"
        );
        for (i, g) in report.growth.iter().enumerate() {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | ≤ {} {} | {:+.1} | {:+.1} | {} |",
                if i == 0 { "cold" } else { "warm" },
                mb(g.body as u64),
                g.largest,
                mb(g.before),
                mb(g.peak),
                mb(g.growth()),
                mb(g.bound()),
                if g.growth() <= g.bound() {
                    "✓"
                } else {
                    "✗"
                },
                g.anon_growth() as f64 / 1e6,
                g.file_growth() as f64 / 1e6,
                g.committed
            );
        }
        let _ = writeln!(
            out,
            "\n\"after\": resident memory once the list was committed against before it, split into anonymous (heap, wasm memories) and file-backed (the binary's code and data, paged in on first use) (`RssAnon`, `RssFile`)."
        );
        out.push('\n');
    }
    if !report.reloads.added.is_empty() {
        let q = |v: &[Duration], q: f64| {
            let mut v = v.to_vec();
            v.sort();
            v[((v.len() - 1) as f64 * q).round() as usize]
        };
        let ms = |d: Duration| format!("{:.0}", d.as_secs_f64() * 1e3);
        let _ = writeln!(
            out,
            "### Hot reload (edgegate+3 filters, static upstream)\n"
        );
        let _ = writeln!(
            out,
            "| change | trials | p50 ms | p90 ms | max ms | goal |\n|---|---|---|---|---|---|"
        );
        let reloads = &report.reloads;
        for (what, v) in [
            (
                "rename of a component never seen → first response it filtered (compiled, no function compiled before), client asking back to back",
                &reloads.compiled,
            ),
            (
                "the same, client pausing 1 ms between requests",
                &reloads.compiled_paced,
            ),
            (
                "rename of a new build of a component compiled before (its functions taken from the store), client asking back to back",
                &reloads.compiled_known,
            ),
            (
                "rename of a component compiled before, new config → first response it filtered",
                &reloads.added,
            ),
            ("removal → first response without it", &reloads.removed),
        ] {
            if v.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                "| {what} | {} | {} | {} | {} | ≤ 1000 {} |",
                v.len(),
                ms(q(v, 0.5)),
                ms(q(v, 0.9)),
                ms(q(v, 1.0)),
                if q(v, 1.0) <= Duration::from_secs(1) {
                    "✓"
                } else {
                    "✗"
                }
            );
        }
        let _ = writeln!(
            out,
            "\nA component never seen is the tagger with a custom section naming its trial: new bytes, so the gateway compiles it (in a child process, on the gateway's one core). Before the first two kinds of trial the harness deletes the functions the gateway compiled so far (`*.functions`), so the compile takes none; the third leaves them, as a new build of a filter finds them. The back-to-back client keeps that core busy while it compiles; the paced one leaves it idle between requests. A component compiled before is mapped from the gateway's compiled-code store."
        );
        out.push('\n');
    }
    out
}

fn wrk_table(out: &mut String, name: &str, rows: &[WrkRow]) {
    let direct = rows.iter().find(|r| r.target == "direct");
    let go = rows.iter().find(|r| r.target == GO);
    let _ = writeln!(out, "**{name}**\n");
    let _ = writeln!(
        out,
        "| target | req/s | × direct | × Go | MB/s | p50 µs | p99 µs | added p50 µs | added p99 µs | proxy CPU µs/req | CPU × Go | peak RSS MB | RSS × Go | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for row in rows {
        let (added50, added99) = match direct {
            Some(d) if row.target != "direct" => {
                (added(row.wrk.p50, d.wrk.p50), added(row.wrk.p99, d.wrk.p99))
            }
            _ => ("–".to_owned(), "–".to_owned()),
        };
        let cpu = row.cpu_per_request_us();
        let go_cpu = go.and_then(WrkRow::cpu_per_request_us);
        let rss = row.spent.map(|s| s.peak_rss);
        let go_rss = go.and_then(|g| g.spent).map(|s| s.peak_rss as f64);
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} | {} | {:.1} | {} | {} | {added50} | {added99} | {} | {} | {} | {} | {} |",
            row.target,
            row.wrk.requests_per_second,
            ratio(
                row.wrk.requests_per_second,
                direct.map(|d| d.wrk.requests_per_second)
            ),
            ratio(
                row.wrk.requests_per_second,
                go.map(|g| g.wrk.requests_per_second)
            ),
            row.wrk.bytes_per_second / 1e6,
            us(row.wrk.p50),
            us(row.wrk.p99),
            cpu.map_or("–".to_owned(), |c| format!("{c:.1}")),
            cpu.map_or("–".to_owned(), |c| ratio(c, go_cpu)),
            rss.map_or("–".to_owned(), mb),
            rss.map_or("–".to_owned(), |r| ratio(r as f64, go_rss)),
            row.wrk.errors,
        );
    }
    out.push('\n');
}

fn watch_table(out: &mut String, rows: &[WatchRow], settings: &Settings) {
    let direct = rows.iter().find(|r| r.target == "direct");
    let go = rows.iter().find(|r| r.target == GO);
    let _ = writeln!(
        out,
        "**watch fan-out: {} watches, each sent {} events/s by the upstream; delay from the upstream's write to the client's read**\n",
        settings.watchers, settings.events_per_second
    );
    let _ = writeln!(
        out,
        "| target | events/s received | p50 µs | p99 µs | max µs | added p50 µs | added p99 µs | proxy CPU s | CPU × Go | peak RSS MB | RSS × Go |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for row in rows {
        let (added50, added99) = match direct {
            Some(d) if row.target != "direct" => (added(row.p50, d.p50), added(row.p99, d.p99)),
            _ => ("–".to_owned(), "–".to_owned()),
        };
        let cpu = row.spent.map(|s| s.cpu.as_secs_f64());
        let go_cpu = go.and_then(|g| g.spent).map(|s| s.cpu.as_secs_f64());
        let rss = row.spent.map(|s| s.peak_rss);
        let go_rss = go.and_then(|g| g.spent).map(|s| s.peak_rss as f64);
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} | {} | {} | {added50} | {added99} | {} | {} | {} | {} |",
            row.target,
            row.events_per_second,
            us(row.p50),
            us(row.p99),
            us(row.max),
            cpu.map_or("–".to_owned(), |c| format!("{c:.2}")),
            cpu.map_or("–".to_owned(), |c| ratio(c, go_cpu)),
            rss.map_or("–".to_owned(), mb),
            rss.map_or("–".to_owned(), |r| ratio(r as f64, go_rss)),
        );
    }
    out.push('\n');
}
