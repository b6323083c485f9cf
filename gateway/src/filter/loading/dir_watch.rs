//! The watch on the filter directory (and on the folder of the gateway config file): any
//! change wakes the reload task, which rescans once the folders have been quiet for a spell.
//! Events are not read one by one, since the rescan decides what changed. None is merged
//! away either: a change made after a rescan began always brings another rescan, even a
//! file removed right after the rescan that loaded it (a per-file debouncer would cancel
//! its "created" and "removed" and leave the filter serving).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::filter::error::FilterError;

/// How many quiet spells a rescan waits at most: folders that never go quiet (a file
/// written slowly in place) are still rescanned this often.
const LONGEST_SETTLE_SPELLS: u32 = 10;

/// Watches `dir`, and the folder of `config_file`, waking `wake` on each change.
pub(crate) fn watch(
    dir: &Path,
    config_file: Option<&Path>,
    wake: Arc<Notify>,
) -> Result<RecommendedWatcher, FilterError> {
    let watch_error = |path: &Path, error: notify::Error| FilterError::Watch {
        path: path.to_owned(),
        message: error.to_string(),
    };
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        match event {
            // Opening a file changes nothing (a rescan opens every file: waking on that
            // would rescan forever); closing one written to does.
            Ok(event)
                if matches!(event.kind, EventKind::Access(kind)
                    if kind != AccessKind::Close(AccessMode::Write)) => {}
            Ok(_) => wake.notify_one(),
            Err(error) => {
                tracing::warn!(%error, "filter directory watch error");
                // A missed event must not leave a stale chain: rescan anyway.
                wake.notify_one();
            }
        }
    })
    .map_err(|e| watch_error(dir, e))?;
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(|e| watch_error(dir, e))?;
    if let Some(file) = config_file {
        let parent = file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        watcher
            .watch(parent, RecursiveMode::NonRecursive)
            .map_err(|e| watch_error(parent, e))?;
    }
    Ok(watcher)
}

/// Waits for a change, then until `quiet` passes without another, or at most
/// [`LONGEST_SETTLE_SPELLS`] quiet spells after the first.
pub(crate) async fn settled(wake: &Notify, quiet: Duration) {
    wake.notified().await;
    let latest = Instant::now() + quiet * LONGEST_SETTLE_SPELLS;
    loop {
        let spell_end = (Instant::now() + quiet).min(latest);
        let changed = tokio::time::timeout_at(spell_end, wake.notified()).await;
        if changed.is_err() || Instant::now() >= latest {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_rescan_waits_for_a_quiet_spell_but_not_for_ever() {
        let wake = Arc::new(Notify::new());
        let quiet = Duration::from_millis(100);
        let start = Instant::now();
        let ticker = tokio::spawn({
            let wake = Arc::clone(&wake);
            async move {
                // A change every 50 ms for 3 s: the folder is never quiet.
                for _ in 0..60 {
                    wake.notify_one();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        });
        settled(&wake, quiet).await;
        assert_eq!(start.elapsed(), quiet * LONGEST_SETTLE_SPELLS);
        ticker.await.unwrap();
        // The changes stopped at 3 s; the last one is waited out.
        let after = Instant::now();
        settled(&wake, quiet).await;
        assert_eq!(after.elapsed(), quiet);
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_during_a_rescan_brings_another() {
        let wake = Notify::new();
        let quiet = Duration::from_millis(100);
        wake.notify_one();
        settled(&wake, quiet).await;
        // The rescan runs; a change comes meanwhile, and is kept for the next wait.
        wake.notify_one();
        let start = Instant::now();
        settled(&wake, quiet).await;
        assert_eq!(start.elapsed(), quiet);
    }
}
