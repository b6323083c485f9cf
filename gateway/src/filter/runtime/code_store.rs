//! The compiled-code store: each component's machine code in a file of its own, named by
//! the component's digest and the engine's settings, which the gateway maps instead of
//! reading. Mapped code stays file-backed: only the pages a filter has run are resident,
//! the kernel may drop them under memory pressure, and a load copies nothing.
//!
//! A file is written under a temporary name, synced, then renamed into place, so a reader
//! sees a whole file or none; files are never written again once named, only deleted,
//! which a mapping survives. A file that does not load (another engine's, damaged) is
//! deleted and compiled again.
//!
//! Each file of code has its seal beside it (`.seal`, see [`super::seal`]), written first;
//! code is read once through the descriptor it is then mapped from, its seal checked, and
//! only then mapped, so that code no one but the gateway wrote never runs. (Reading it
//! brings the file into the page cache, which the mapping then shares.)

use std::fs::{self, File, FileTimes, OpenOptions};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, Read};

pub(crate) use crate::whole_file::write_whole;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use prometheus_client::metrics::counter::Counter;
use wasmtime::Engine;
use wasmtime::component::Component;

use super::seal::{Seal, effective_uid};

/// The extension of a stored component's code.
const EXTENSION: &str = "cwasm";

/// The extension of the seal of a stored component's code.
const SEAL_EXTENSION: &str = "seal";

/// The extension of a component's functions (kept by the function cache, pruned here with
/// the component's code).
pub(crate) const FUNCTIONS_EXTENSION: &str = "functions";

/// How many files no loaded filter uses are kept, the most recently used (loaded or written)
/// first: a filter removed and put back, or compiled ahead of its install (in a node image,
/// say), is not compiled again.
pub(crate) const UNUSED_KEPT: usize = 16;

/// How old a temporary file must be before pruning takes it for one a compile left behind
/// (a crash between write and rename) rather than one being written.
const TEMPORARY_ABANDONED: Duration = Duration::from_secs(3600);

/// Hex SHA-256 of bytes: what names a filter's `.wasm` and its compiled code in the store.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A directory of compiled components for one engine's settings.
#[derive(Debug)]
pub(crate) struct CompiledStore {
    dir: PathBuf,
    /// Names the engine's settings and wasmtime's version in file names.
    engine_tag: String,
    /// The key of the store's seals.
    seal: Arc<Seal>,
    /// Files of code refused because their seal did not verify.
    rejects: Counter,
}

impl CompiledStore {
    /// The store in `dir`, a directory [`Seal::open`] trusted and `seal` is the key of, for
    /// code `engine` compiles; refused code is counted in `rejects`.
    pub(crate) fn open(
        dir: &Path,
        engine: &Engine,
        seal: Arc<Seal>,
        rejects: Counter,
    ) -> io::Result<CompiledStore> {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(CompiledStore {
            dir: std::path::absolute(dir)?,
            engine_tag: format!("{:016x}", hasher.finish()),
            seal,
            rejects,
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
    /// there is any whose seal verifies and that loads.
    pub(crate) fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.path(digest);
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return None,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot open compiled code; compiling again");
                self.delete(&path);
                return None;
            }
        };
        if let Err(reason) = self.verify(&file, &path) {
            self.rejects.inc();
            tracing::warn!(path = %path.display(), %reason, "compiled code refused, not mapped; compiling again");
            self.delete(&path);
            return None;
        }
        // Mapped through the descriptor just checked, not the name, which could have been
        // renamed over meanwhile; the path stands in where there is no /proc.
        let checked = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        let source = if checked.exists() { &checked } else { &path };
        // SAFETY: wasmtime trusts the code it maps. This file is sealed under the store's
        // key, which only the gateway's user can read, in a directory only that user can
        // write (`Seal::open`), and it is not writable by others: the gateway wrote it whole
        // with `store`, for this engine's settings (its name says so, and wasmtime checks its
        // header again). No file is written once named, only replaced or deleted, which a
        // mapping outlives.
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize_file(engine, source) };
        drop(file);
        match loaded {
            Ok(component) => {
                touch(&path);
                Some(component)
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), error = format!("{error:#}"), "compiled code does not load; compiling again");
                self.delete(&path);
                None
            }
        }
    }

    /// Why the code in `file` (at `path`) may not be mapped, if it may not: it is not a
    /// regular file of the gateway's user writable by it alone, or its seal is missing or
    /// does not match what `file` holds.
    fn verify(&self, mut file: &File, path: &Path) -> Result<(), String> {
        let meta = file.metadata().map_err(|e| e.to_string())?;
        let ours = effective_uid();
        if !meta.is_file() || meta.uid() != ours || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "not a file only uid {ours} may write (uid {}, mode {:o})",
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
        let mut code = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or_default());
        file.read_to_end(&mut code).map_err(|e| e.to_string())?;
        let seal =
            fs::read(path.with_extension(SEAL_EXTENSION)).map_err(|e| format!("no seal: {e}"))?;
        if self.seal.verify(file_name(path), &code, &seal) {
            Ok(())
        } else {
            Err("its seal does not match (tampered, or sealed under another key)".into())
        }
    }

    /// Deletes a file of code and its seal.
    fn delete(&self, path: &Path) {
        let _ = fs::remove_file(path);
        let _ = fs::remove_file(path.with_extension(SEAL_EXTENSION));
    }

    /// Stores `code`, compiled from the component whose digest is `digest`, under its name,
    /// its seal first.
    pub(crate) fn store(&self, digest: &str, code: &[u8]) -> io::Result<PathBuf> {
        let path = self.path(digest);
        let seal = self.seal.seal(file_name(&path), code);
        write_whole(&path.with_extension(SEAL_EXTENSION), &seal)?;
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
        let functions_suffix = format!(".{FUNCTIONS_EXTENSION}");
        let seal_suffix = format!(".{SEAL_EXTENSION}");
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
            } else if name.ends_with(&seal_suffix) {
                functions.push((path.with_extension(EXTENSION), path));
            }
        }
        unused.sort();
        doomed.extend(unused.into_iter().skip(kept).map(|(_, path)| path));
        // Functions and seals go with their code.
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

/// The file name of `path` (the store's names are UTF-8).
fn file_name(path: &Path) -> &str {
    path.file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
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
