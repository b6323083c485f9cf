//! A process's CPU time and memory, read from `/proc/<pid>/stat` and `/proc/<pid>/status`.

use std::time::Duration;

use anyhow::{Context, Result};

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: u64 = 100;

/// CPU time used so far by process `pid` (utime + stime).
pub fn cpu_time(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces: fields are counted after its `)`.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("a /proc stat line")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks =
        |i: usize| -> Result<u64> { Ok(fields.get(i).context("a stat field")?.parse::<u64>()?) };
    let total = ticks(11)? + ticks(12)?;
    Ok(Duration::from_millis(total * 1000 / TICKS_PER_SECOND))
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`), in bytes.
pub fn status_bytes(pid: u32, field: &str) -> Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    let kib: u64 = line.split_whitespace().nth(1).context("a value")?.parse()?;
    Ok(kib * 1024)
}

/// A numeric field of `/proc/<pid>/status` without a unit (`Threads:`).
pub fn status_value(pid: u32, field: &str) -> Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    Ok(line.split_whitespace().nth(1).context("a value")?.parse()?)
}

/// File descriptors `pid` has open.
pub fn open_fds(pid: u32) -> Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

/// Resident memory now.
pub fn rss(pid: u32) -> Result<u64> {
    status_bytes(pid, "VmRSS:")
}

/// Peak resident memory since the start or the last [`reset_peak`].
pub fn peak_rss(pid: u32) -> Result<u64> {
    status_bytes(pid, "VmHWM:")
}

/// Resident memory now, split into anonymous (heap, stacks, wasm memories) and file-backed
/// (the binary's code and data, read in as first used) bytes.
pub fn rss_split(pid: u32) -> Result<(u64, u64)> {
    Ok((
        status_bytes(pid, "RssAnon:")?,
        status_bytes(pid, "RssFile:")?,
    ))
}

/// Resets the peak-RSS mark (`VmHWM`) of `pid` to its current RSS.
pub fn reset_peak(pid: u32) -> Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .with_context(|| format!("resetting the peak RSS of {pid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(rss(me).unwrap() > 0);
        assert!(peak_rss(me).unwrap() >= rss(me).unwrap() / 2);
        cpu_time(me).unwrap();
        assert!(status_value(me, "Threads:").unwrap() >= 1);
        let _held = std::fs::File::open("/proc/self/status").unwrap();
        assert!(open_fds(me).unwrap() >= 1);
    }
}
