//! The built filter components (`target/filters/NAME.wasm`), built by `tests/build-filters`
//! once per test run when any is missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use anyhow::{Result, bail};

/// `target/filters/`, holding every component in `names` (built now if one is missing).
pub fn built(names: &[&str]) -> Result<PathBuf> {
    // One build at a time: tests run in parallel threads.
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = repo.join("target/filters");
    if names
        .iter()
        .any(|n| !dir.join(format!("{n}.wasm")).exists())
    {
        // A target dir of its own: the `cargo test` running us holds the lock of ours.
        let status = Command::new("bash")
            .arg(repo.join("tests/build-filters"))
            .env("CARGO_TARGET_DIR", repo.join("target/filter-build"))
            .status()?;
        if !status.success() {
            bail!("tests/build-filters failed");
        }
    }
    Ok(dir)
}
