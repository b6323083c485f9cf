//! The thin-link harness's report: a column per mode.

use std::time::Duration;

use super::{Figures, Settings, Spent};

/// The figures in Markdown: the settings, then a column per mode.
pub fn markdown(settings: &Settings, figures: &[Figures]) -> String {
    let wan = &settings.wan;
    let mut out = format!(
        "# The node over a thin link\n\n{} kbit/s, {} ms RTT, {:.0} % loss, a {} KiB queue; {} \
         Services and EndpointSlices; churn {} updates/s for {:?} with the link up, then \
         {:?} cut; deadline {:?}.\n\n",
        wan.rate / 1000,
        wan.delay.as_millis() * 2,
        wan.loss * 100.0,
        wan.queue / 1024,
        settings.services,
        settings.churn,
        settings.churn_time,
        settings.cut,
        settings.deadline,
    );
    let time = |t: Option<Duration>| match t {
        Some(t) => format!("{:.0} s", t.as_secs_f64()),
        None => format!("not within {:?}", settings.deadline),
    };
    let kib = |b: u64| format!("{:.0}", b as f64 / 1024.0);
    type Row<'a> = (&'a str, Box<dyn Fn(&Figures) -> String + 'a>);
    let spent = |s: &Spent| format!("{} / {}", kib(s.up), kib(s.down));
    let rows: Vec<Row> = vec![
        (
            "node Ready (first status after the start)",
            Box::new(|f| time(f.ready)),
        ),
        (
            "kube-proxy's rules for every Service",
            Box::new(|f| time(f.rules)),
        ),
        (
            "join: node → cloud / cloud → node (KiB)",
            Box::new(|f| spent(&f.join)),
        ),
        (
            "join: LISTs of the node's resources the apiserver served",
            Box::new(|f| format!("{:.0}", f.join.lists)),
        ),
        (
            "churn, cut, catch-up: node → cloud / cloud → node (KiB)",
            Box::new(|f| spent(&f.after)),
        ),
        (
            "churn, cut, catch-up: LISTs of the node's resources the apiserver served, the cloud's own among them, the harness's left out",
            Box::new(|f| format!("{:.0}", f.after.lists)),
        ),
        (
            "churn, cut, catch-up: the node's LISTs of Services and EndpointSlices the gateway passed on",
            Box::new(|f| match f.after.passed_on {
                Some(n) => format!("{n:.0}"),
                None => "–".to_owned(),
            }),
        ),
        ("updates made", Box::new(|f| f.updates.to_string())),
        (
            "restore → kube-proxy's rules match the cloud",
            Box::new(|f| time(f.caught_up)),
        ),
    ];
    out.push_str("| |");
    for f in figures {
        out.push_str(&format!(" {:?} |", f.mode));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(figures.len()));
    out.push('\n');
    for (name, cell) in &rows {
        out.push_str(&format!("| {name} |"));
        for f in figures {
            out.push_str(&format!(" {} |", cell(f)));
        }
        out.push('\n');
    }
    out.push_str("\nLISTs of the node's resources after the join, by resource and scope:\n\n");
    for f in figures {
        out.push_str(&format!("- {:?}: {}\n", f.mode, f.after.listed_text()));
    }
    out.push_str("\nThe agents' counters at the end:\n\n");
    for f in figures {
        out.push_str(&format!("- {:?}: {}\n", f.mode, f.agents));
    }
    out
}
