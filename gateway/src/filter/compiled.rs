//! The compiled-code store: each component's machine code in a file of its own, named by
//! the component's digest and the engine's settings, which the gateway maps instead of
//! reading. Mapped code stays file-backed: only the pages a filter has run are resident,
//! the kernel may drop them under memory pressure, and a load copies nothing.
//!
//! A file is written under a temporary name, synced, then renamed into place, so a reader
//! sees a whole file or none; files are never written again once named, only deleted,
//! which a mapping survives. A file that does not load (another engine's, damaged) is
//! deleted and compiled again.

use std::fs::{self, File, FileTimes};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use wasmtime::Engine;
use wasmtime::component::Component;

/// The extension of a stored component's code.
const EXTENSION: &str = "cwasm";

/// How many files no loaded filter uses are kept, the most recently used (loaded or written)
/// first: a filter removed and put back, or compiled ahead of its install (in a node image,
/// say), is not compiled again.
pub(crate) const UNUSED_KEPT: usize = 16;

/// How old a temporary file must be before pruning takes it for one a compile left behind
/// (a crash between write and rename) rather than one being written.
const TEMPORARY_ABANDONED: Duration = Duration::from_secs(3600);

/// A directory of compiled components for one engine's settings.
#[derive(Debug)]
pub(crate) struct CompiledStore {
    dir: PathBuf,
    /// Names the engine's settings and wasmtime's version in file names.
    engine_tag: String,
}

impl CompiledStore {
    /// The store in `dir` (created if missing) for code `engine` compiles.
    pub(crate) fn open(dir: &Path, engine: &Engine) -> io::Result<CompiledStore> {
        fs::create_dir_all(dir)?;
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(CompiledStore {
            dir: std::path::absolute(dir)?,
            engine_tag: format!("{:016x}", hasher.finish()),
        })
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file holding the code of the component whose digest is `digest`.
    fn path(&self, digest: &str) -> PathBuf {
        self.dir
            .join(format!("{digest}-{}.{EXTENSION}", self.engine_tag))
    }

    /// Maps the stored code of the component whose digest (hex SHA-256) is `digest`, if
    /// there is any that loads.
    pub(crate) fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.path(digest);
        if !path.exists() {
            return None;
        }
        // SAFETY: wasmtime trusts the code it maps. The file was written whole by `store`
        // for this engine's settings (its name says so, and wasmtime checks its header
        // again), and no file is written once named, only replaced or deleted, which a
        // mapping outlives.
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize_file(engine, &path) };
        match loaded {
            Ok(component) => {
                touch(&path);
                Some(component)
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), error = format!("{error:#}"), "compiled code does not load; compiling again");
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `code`, compiled from the component whose digest is `digest`, under its name.
    pub(crate) fn store(&self, digest: &str, code: &[u8]) -> io::Result<PathBuf> {
        let path = self.path(digest);
        write_whole(&path, code).map(|()| path)
    }

    /// Deletes the files no filter in `live` (digests) uses beyond the `kept` most recently
    /// used, code of other engine settings (another version's), the compiled functions of
    /// components whose code is gone, and abandoned temporary files; how many it deleted.
    /// Other files are left alone.
    pub(crate) fn prune<'a>(
        &self,
        live: impl IntoIterator<Item = &'a str>,
        kept: usize,
    ) -> io::Result<usize> {
        let live: Vec<PathBuf> = live.into_iter().map(|digest| self.path(digest)).collect();
        let ours = format!("-{}.{EXTENSION}", self.engine_tag);
        let any_engines = format!(".{EXTENSION}");
        let functions_suffix = format!(".{}", super::functions::EXTENSION);
        let now = SystemTime::now();
        let mut unused = Vec::new();
        let mut doomed = Vec::new();
        let mut codes = Vec::new();
        let mut functions = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let path = entry?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let age = || {
                fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .map(|modified| now.duration_since(modified).unwrap_or_default())
            };
            if name.starts_with('.') && name.ends_with(".tmp") {
                if age()? >= TEMPORARY_ABANDONED {
                    doomed.push(path);
                }
            } else if name.ends_with(&ours) {
                codes.push(path.clone());
                if !live.contains(&path) {
                    unused.push((age()?, path));
                }
            } else if name.ends_with(&any_engines) {
                doomed.push(path);
            } else if let Some(digest) = name.strip_suffix(&functions_suffix) {
                functions.push((self.path(digest), path));
            }
        }
        unused.sort();
        doomed.extend(unused.into_iter().skip(kept).map(|(_, path)| path));
        for (code, path) in functions {
            if !codes.contains(&code) || doomed.contains(&code) {
                doomed.push(path);
            }
        }
        Ok(doomed
            .iter()
            .filter(|path| fs::remove_file(path).is_ok())
            .count())
    }
}

/// Writes `bytes` to `path` as the store writes its files: under a temporary name beside it
/// (`.NAME.PID.tmp`, which pruning knows), synced, then renamed into place, so that a reader
/// sees a whole file or none.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(EXTENSION);
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = File::create(&temporary)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        .and_then(|()| fs::rename(&temporary, path));
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

/// Marks a file as used now, so pruning keeps it.
fn touch(path: &Path) {
    let now = SystemTime::now();
    let touched = File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_times(FileTimes::new().set_modified(now)));
    if let Err(error) = touched {
        tracing::debug!(path = %path.display(), %error, "cannot mark compiled code as used");
    }
}
