//! The built filter components: the Rust ones (`target/filters/NAME.wasm`, built by
//! `tests/build-filters`) and the ports to Python and JavaScript (`target/filters-py/` and
//! `target/filters-js/`, built by `filters-py/build` and `filters-js/build`), each built once
//! per test run when one is missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use anyhow::{Result, bail};

/// `target/filters/`, holding every component in `names` (built now if one is missing).
pub fn built(names: &[&str]) -> Result<PathBuf> {
    // A target dir of its own: the `cargo test` running us holds the lock of ours.
    ensure("filters", names, |repo| {
        let mut build = Command::new("bash");
        build
            .arg(repo.join("tests/build-filters"))
            .env("CARGO_TARGET_DIR", repo.join("target/filter-build"));
        build
    })
}

/// `target/<tree>/`, holding the component of every filter in `names` ported to the
/// language of `tree` (`filters-py`, `filters-js`), built now by `<tree>/build`, with the
/// toolchain it installs, if one is missing.
pub fn built_in(tree: &str, names: &[&str]) -> Result<PathBuf> {
    ensure(tree, names, |repo| {
        let mut build = Command::new(repo.join(tree).join("build"));
        build.args(names);
        build
    })
}

/// `target/<dir>/`, after `build` ran if any of `names` is missing there.
fn ensure(dir: &str, names: &[&str], build: impl FnOnce(&Path) -> Command) -> Result<PathBuf> {
    // One build at a time: tests run in parallel threads.
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = repo.join("target").join(dir);
    if names
        .iter()
        .any(|n| !dir.join(format!("{n}.wasm")).exists())
    {
        let status = build(&repo).status()?;
        if !status.success() {
            bail!("building {} failed", dir.display());
        }
    }
    Ok(dir)
}
