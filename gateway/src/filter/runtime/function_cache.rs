//! Cranelift's incremental cache, kept beside the compiled-code store: the machine code of
//! every function compiled for a stored component, so that compiling a new component takes
//! the code of the functions it shares with those (the SDK, `serde_json` and std every
//! filter links; nearly all of a new build of a filter) instead of compiling them again.
//!
//! Cranelift keys a function by a hash of its IR and of the compiler's settings and version,
//! with the functions it calls left out, so a function found again at another index in a
//! new component still matches, and no entry of another wasmtime is ever taken.
//!
//! Each compile's functions (those it took from the cache and those it compiled) are written
//! to one file, `DIGEST.functions`, beside the component's code, as the store writes code:
//! whole, sealed at its end (an HMAC-SHA256 under the store's key, see [`super::seal`]:
//! functions' code ends up in the code the gateway maps), synced, then renamed into place. A file is
//! pruned with the component's code. The files are read when this process compiles, and let
//! go once the compile's functions are written, so a gateway whose child process compiles
//! for it holds none of them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::metrics::counter::Counter;
use wasmtime::CacheStore;

use super::code_store::{FUNCTIONS_EXTENSION as EXTENSION, write_whole};
use super::seal::{LENGTH, Seal};

/// What a file of functions starts with (its format's version included).
const MAGIC: &[u8] = b"edgegate-functions 1\n";

/// The functions of the stored components, read when a compile first asks, and those the
/// compiles of this process have used since their functions were last written.
#[derive(Debug)]
pub(crate) struct FunctionCache {
    dir: PathBuf,
    /// The key of the files' seals.
    seal: Arc<Seal>,
    /// Files refused because their seal did not verify.
    rejects: Counter,
    state: Mutex<State>,
}

/// Functions' machine code (Cranelift's serialized form) by their cache key.
type Functions = HashMap<Box<[u8]>, Arc<[u8]>>;

#[derive(Debug, Default)]
struct State {
    read: bool,
    known: Functions,
    used: Functions,
    hits: u64,
    compiled: u64,
}

impl FunctionCache {
    /// The cache whose files are in `dir`, the compiled-code store's directory, sealed with
    /// `seal`; files refused are counted in `rejects`.
    pub(crate) fn new(dir: &Path, seal: Arc<Seal>, rejects: Counter) -> FunctionCache {
        FunctionCache {
            dir: dir.to_owned(),
            seal,
            rejects,
            state: Mutex::default(),
        }
    }

    /// Writes the functions the compiles since the last write used, as those of the component
    /// whose digest is `digest`, and lets go of those read (the next compile reads again).
    pub(crate) fn store(&self, digest: &str) -> io::Result<()> {
        let used = {
            let mut state = self.lock();
            state.known = HashMap::new();
            state.read = false;
            std::mem::take(&mut state.used)
        };
        let mut bytes = MAGIC.to_vec();
        for (key, value) in &used {
            for part in [&**key, &**value] {
                let length = u32::try_from(part.len()).map_err(io::Error::other)?;
                bytes.extend_from_slice(&length.to_le_bytes());
                bytes.extend_from_slice(part);
            }
        }
        let name = format!("{digest}.{EXTENSION}");
        let seal = self.seal.seal(&name, &bytes);
        bytes.extend_from_slice(&seal);
        write_whole(&self.dir.join(name), &bytes)
    }

    /// How many functions compiles of this process took from the cache, and how many they
    /// compiled.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (u64, u64) {
        let state = self.lock();
        (state.hits, state.compiled)
    }

    /// The state as it is (a compile that panicked leaves it usable).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state, with the files read.
    fn state(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        if !state.read {
            state.read = true;
            match self.read_all() {
                Ok(known) => state.known = known,
                Err(error) => {
                    tracing::debug!(dir = %self.dir.display(), %error, "cannot read compiled functions")
                }
            }
        }
        state
    }

    /// Every function of every file in the directory that is whole.
    fn read_all(&self) -> io::Result<Functions> {
        let mut known = HashMap::new();
        for entry in fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some(EXTENSION) {
                continue;
            }
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            match fs::read(&path).map(|bytes| parse(&self.seal, name, &bytes)) {
                Ok(Some(functions)) => known.extend(functions),
                Ok(None) => {
                    self.rejects.inc();
                    tracing::warn!(path = %path.display(), "compiled functions damaged or not sealed with the store's key; deleting them");
                    let _ = fs::remove_file(&path);
                }
                Err(error) => {
                    tracing::debug!(path = %path.display(), %error, "cannot read compiled functions")
                }
            }
        }
        Ok(known)
    }
}

/// The functions the file named `name` holds; `None` when it is not a whole file of this
/// format sealed with `seal`.
fn parse(seal: &Seal, name: &str, bytes: &[u8]) -> Option<Functions> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(LENGTH)?)?;
    if !seal.verify(name, body, sum) {
        return None;
    }
    let mut rest = body.strip_prefix(MAGIC)?;
    let mut part = || -> Option<&[u8]> {
        let (length, after) = rest.split_first_chunk::<4>()?;
        let (part, after) =
            after.split_at_checked(usize::try_from(u32::from_le_bytes(*length)).ok()?)?;
        rest = after;
        Some(part)
    };
    let mut functions = Functions::new();
    while let Some(key) = part() {
        functions.insert(key.into(), part()?.into());
    }
    rest.is_empty().then_some(functions)
}

impl CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let mut state = self.state();
        let value = state.known.get(key).cloned()?;
        state.hits += 1;
        state.used.insert(key.into(), Arc::clone(&value));
        Some(Cow::Owned(value.to_vec()))
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let mut state = self.state();
        state.compiled += 1;
        let value: Arc<[u8]> = value.into();
        state.known.insert(key.into(), Arc::clone(&value));
        state.used.insert(key.into(), value);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    fn scratch() -> tempfile::TempDir {
        tempfile::tempdir().expect("a scratch dir")
    }

    /// The cache of `dir`, sealed with the key the store keeps there.
    fn opened(dir: &Path) -> FunctionCache {
        let seal = Seal::open(dir).expect("the store's key");
        FunctionCache::new(dir, Arc::new(seal), Counter::default())
    }

    #[test]
    fn functions_written_for_one_component_are_found_by_a_new_process() {
        let dir = scratch();
        let first = opened(dir.path());
        assert!(first.get(b"k1").is_none());
        assert!(first.insert(b"k1", b"code one".to_vec()));
        assert!(first.insert(b"k2", Vec::new()));
        first.store("aa").expect("written");
        // What was written is not written again for the next component unless used again.
        assert!(first.insert(b"k3", b"code three".to_vec()));
        first.store("bb").expect("written");

        let second = opened(dir.path());
        assert_eq!(second.get(b"k1").as_deref(), Some(&b"code one"[..]));
        assert_eq!(second.get(b"k2").as_deref(), Some(&b""[..]));
        assert_eq!(second.get(b"k3").as_deref(), Some(&b"code three"[..]));
        assert!(second.get(b"k4").is_none());
        assert_eq!(second.counts(), (3, 0));
        // Functions taken from the cache are written with the component that used them.
        second.store("cc").expect("written");
        fs::remove_file(dir.path().join("aa.functions")).unwrap();
        fs::remove_file(dir.path().join("bb.functions")).unwrap();
        let third = opened(dir.path());
        assert_eq!(third.get(b"k1").as_deref(), Some(&b"code one"[..]));
        assert_eq!(third.get(b"k3").as_deref(), Some(&b"code three"[..]));
    }

    #[test]
    fn a_damaged_file_is_deleted_and_the_others_still_read() {
        let dir = scratch();
        let cache = opened(dir.path());
        cache.insert(b"k1", b"code one".to_vec());
        cache.store("aa").unwrap();
        cache.insert(b"k2", b"code two".to_vec());
        cache.store("bb").unwrap();
        let whole = fs::read(dir.path().join("bb.functions")).unwrap();
        for damaged in [
            whole[..whole.len() - 1].to_vec(),
            whole[..10].to_vec(),
            Vec::new(),
            {
                let mut flipped = whole.clone();
                flipped[MAGIC.len() + 5] ^= 1;
                flipped
            },
        ] {
            fs::write(dir.path().join("bb.functions"), &damaged).unwrap();
            let cache = opened(dir.path());
            assert!(cache.get(b"k2").is_none());
            assert!(cache.get(b"k1").is_some());
            assert!(!dir.path().join("bb.functions").exists());
        }
    }

    #[test]
    fn lengths_that_run_past_the_end_are_refused() {
        // Whole and sealed, but a length beyond the end, and a key without its value.
        let dir = scratch();
        for (length, part) in [(100u32, &b"short"[..]), (1, b"k")] {
            let mut body = MAGIC.to_vec();
            body.extend_from_slice(&length.to_le_bytes());
            body.extend_from_slice(part);
            let seal = Seal::open(dir.path()).expect("the store's key");
            body.extend_from_slice(&seal.seal("aa.functions", &body));
            assert!(parse(&seal, "aa.functions", &body).is_none(), "{length}");
        }
    }

    #[test]
    fn functions_not_sealed_with_the_stores_key_are_refused() {
        let dir = scratch();
        let cache = opened(dir.path());
        cache.insert(b"k1", b"code one".to_vec());
        cache.store("aa").unwrap();
        let file = dir.path().join("aa.functions");
        let whole = fs::read(&file).unwrap();
        let body = &whole[..whole.len() - LENGTH];
        // Whole and summed as an earlier gateway summed (SHA-256): anyone can write that.
        let mut summed = body.to_vec();
        summed.extend_from_slice(&sha2::Sha256::digest(body));
        // Sealed, but under another name: another component's functions.
        let mut renamed = body.to_vec();
        renamed.extend_from_slice(&Seal::open(dir.path()).unwrap().seal("bb.functions", body));
        for (case, bytes) in [("summed", summed), ("renamed", renamed)] {
            fs::write(&file, &bytes).unwrap();
            let rejects = Counter::default();
            let seal = Arc::new(Seal::open(dir.path()).unwrap());
            let cache = FunctionCache::new(dir.path(), seal, rejects.clone());
            assert!(cache.get(b"k1").is_none(), "{case}");
            assert_eq!(rejects.get(), 1, "{case}");
            assert!(!file.exists(), "{case}");
        }
        // Sealed under a key since replaced.
        let cache = opened(dir.path());
        cache.insert(b"k1", b"code one".to_vec());
        cache.store("aa").unwrap();
        fs::remove_file(dir.path().join(super::super::seal::KEY_FILE)).unwrap();
        assert!(opened(dir.path()).get(b"k1").is_none());
    }
}
