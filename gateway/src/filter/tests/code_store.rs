//! The compiled-code store: what is compiled once is mapped after, damaged or foreign code
//! is compiled again, pruning keeps what is live and what was used last, and a new build of
//! a component takes the functions compiled for the last.

use std::fs::{self, File, FileTimes};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::support::{TempDir, temp_dir, wasm};
use crate::filter::metrics::Place;
use crate::filter::runtime::code_store::CompiledStore;
use crate::filter::runtime::code_store::sha256;
use crate::filter::runtime::engine::Runtime;
use crate::filter::runtime::seal::Seal;

/// The store in `dir` for code `engine` compiles, as the runtime opens it.
fn store_for(dir: &Path, engine: &wasmtime::Engine) -> CompiledStore {
    let seal = Arc::new(Seal::open(dir).expect("the store's key"));
    CompiledStore::open(dir, engine, seal, Default::default()).expect("the store opens")
}

/// The store's files of compiled code, by name.
fn stored(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("the store's dir")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    files.sort();
    files
}

/// The store's files of code (not functions, not temporary).
fn codes(dir: &Path) -> Vec<PathBuf> {
    let mut files = stored(dir);
    files.retain(|file| file.extension().is_some_and(|e| e == "cwasm"));
    files
}

/// A store in a fresh directory holding the tagger, the runtime that compiled it, and its file.
fn tagger_stored(tag: &str) -> (TempDir, Arc<Runtime>, PathBuf) {
    let cache = temp_dir(tag);
    let runtime = Runtime::new(Some(&*cache), None).expect("the runtime builds");
    runtime
        .compile("tagger", &wasm("tagger"))
        .expect("compiled");
    let file = codes(&cache).remove(0);
    (cache, runtime, file)
}

/// Sets a file's modification time `age` into the past.
fn age(path: &Path, age: Duration) {
    let then = SystemTime::now() - age;
    File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_times(FileTimes::new().set_modified(then)))
        .expect("the file's time is set");
}

#[test]
fn code_compiled_once_is_mapped_by_the_next_runtime_and_instantiates() {
    let cache = temp_dir("compiled-reuse");
    let first = Runtime::new(Some(&*cache), None).expect("the runtime builds");
    let (_, place) = first.compile("tagger", &wasm("tagger")).expect("compiled");
    assert_eq!(place, Some(Place::Gateway));
    let files = stored(&cache);
    let digest = sha256(&wasm("tagger"));
    assert_eq!(
        files.len(),
        4,
        "code, its seal, functions and the key, no temporary: {files:?}"
    );
    let name = files[0].file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(
        name.starts_with(&digest) && name.ends_with(".cwasm"),
        "{name}"
    );
    assert_eq!(files[1], files[0].with_extension("seal"));
    assert_eq!(files[2], cache.join(format!("{digest}.functions")));
    assert_eq!(files[3], cache.join(crate::filter::runtime::seal::KEY_FILE));

    let second = Runtime::new(Some(&*cache), None).expect("the runtime builds");
    let (component, place) = second.compile("tagger", &wasm("tagger")).expect("mapped");
    assert_eq!(place, None, "found in the store, not compiled");
    second
        .prepare("tagger", &component)
        .expect("the mapped component links");
    assert_eq!(stored(&cache), files);
}

#[test]
fn damaged_code_is_compiled_again_and_replaced() {
    let (cache, runtime, file) = tagger_stored("compiled-damaged");
    drop(runtime);
    let whole = fs::read(&file).expect("the stored code");
    for damaged in [
        &whole[..whole.len() / 2],
        b"not an ELF file".as_slice(),
        &[],
    ] {
        fs::write(&file, damaged).expect("damaged");
        let runtime = Runtime::new(Some(&*cache), None).expect("the runtime builds");
        let (_, place) = runtime
            .compile("tagger", &wasm("tagger"))
            .expect("compiled again");
        assert_eq!(place, Some(Place::Gateway), "{} bytes", damaged.len());
        assert_eq!(fs::read(&file).expect("stored again"), whole);
    }
}

#[test]
fn code_of_other_engine_settings_is_not_used() {
    let cache = temp_dir("compiled-foreign");
    let ours = Runtime::new(Some(&*cache), None).expect("the runtime builds");
    let other_engine = wasmtime::Engine::new(&wasmtime::Config::new()).expect("an engine");
    let other = store_for(&cache, &other_engine);
    let tagger = wasm("tagger");
    let code = other_engine
        .precompile_component(&tagger)
        .expect("compiled");
    other.store(&sha256(&tagger), &code).expect("stored");
    assert!(other.load(&other_engine, &sha256(&tagger)).is_some());
    let (_, place) = ours.compile("tagger", &tagger).expect("compiled");
    assert_eq!(
        place,
        Some(Place::Gateway),
        "another engine's code is not ours"
    );
    assert_eq!(
        codes(&cache).len(),
        2,
        "each engine's code has its own file"
    );
}

#[test]
fn pruning_keeps_live_and_recently_used_code_and_deletes_the_rest() {
    let cache = temp_dir("compiled-prune");
    let engine = wasmtime::Engine::new(&wasmtime::Config::new()).expect("an engine");
    let store = store_for(&cache, &engine);
    let day = Duration::from_secs(24 * 3600);
    let [live, newest, newer, oldest] = [b"live".as_slice(), b"newest", b"newer", b"oldest"]
        .map(|wasm| store.store(&sha256(wasm), b"code").expect("stored"));
    for (file, days) in [(&live, 30), (&newer, 2), (&oldest, 3)] {
        age(file, day * days);
    }
    let other_version = cache.join(format!("{}-0123456789abcdef.cwasm", sha256(b"live")));
    let other_version_seal = other_version.with_extension("seal");
    let abandoned = cache.join(".abandoned.cwasm.1.tmp");
    let writing = cache.join(".writing.cwasm.2.tmp");
    let foreign = cache.join("README");
    let [live_functions, oldest_functions, orphan_functions] =
        [b"live".as_slice(), b"oldest", b"orphan"]
            .map(|wasm| cache.join(format!("{}.functions", sha256(wasm))));
    for file in [
        &other_version,
        &other_version_seal,
        &abandoned,
        &writing,
        &foreign,
        &live_functions,
        &oldest_functions,
        &orphan_functions,
    ] {
        fs::write(file, b"bytes").expect("written");
    }
    for file in [&other_version, &abandoned, &foreign] {
        age(file, day);
    }

    let deleted = store.prune([sha256(b"live").as_str()], 2).expect("pruned");
    assert_eq!(
        deleted, 7,
        "the oldest unused with its seal and functions, the other version's with its seal, \
         the abandoned, and functions whose code is gone"
    );
    let seals = [&live, &newest, &newer].map(|code| code.with_extension("seal"));
    let key = cache.join(crate::filter::runtime::seal::KEY_FILE);
    let mut left = vec![live, newest, newer, writing, foreign, live_functions, key];
    left.extend(seals);
    left.sort();
    assert_eq!(stored(&cache), left);
    assert!(!oldest.exists() && !other_version.exists() && !abandoned.exists());
}

#[test]
fn loading_marks_code_as_used() {
    let (_cache, runtime, file) = tagger_stored("compiled-touch");
    age(&file, Duration::from_secs(7 * 24 * 3600));
    runtime.compile("tagger", &wasm("tagger")).expect("mapped");
    let modified = fs::metadata(&file)
        .and_then(|m| m.modified())
        .expect("a time");
    let since = SystemTime::now()
        .duration_since(modified)
        .unwrap_or_default();
    assert!(
        since < Duration::from_secs(3600),
        "{since:?} since its last use"
    );
}

/// `component` with a custom section appended: the same code in bytes of another digest.
fn with_custom_section(component: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut section = Vec::new();
    leb(name.len(), &mut section);
    section.extend_from_slice(name.as_bytes());
    section.extend_from_slice(payload);
    let mut out = component.to_vec();
    out.push(0);
    leb(section.len(), &mut out);
    out.extend_from_slice(&section);
    out
}

#[test]
fn a_new_build_of_a_component_takes_the_functions_compiled_for_the_last() {
    let cache = temp_dir("compiled-functions");
    let first = Runtime::new(Some(&*cache), None).expect("the runtime builds");
    first.compile("tagger", &wasm("tagger")).expect("compiled");
    let rebuilt = with_custom_section(&wasm("tagger"), "build", b"2");
    // A new runtime, as each child process is.
    let second = Runtime::new(Some(&*cache), None).expect("the runtime builds");
    let (component, place) = second.compile("tagger", &rebuilt).expect("compiled");
    assert_eq!(place, Some(Place::Gateway));
    let functions = second.functions().expect("a store has functions");
    let (hits, compiled) = functions.counts();
    // Most, not all: a few percent of functions are given IR that differs between compiles
    // of the same code (their machine code does not), and miss.
    assert!(
        hits > 100 && hits >= 4 * compiled,
        "{hits} taken, {compiled} compiled"
    );
    // The code is what a compile without the cache makes.
    let cold = temp_dir("compiled-functions-cold");
    let third = Runtime::new(Some(&*cold), None).expect("the runtime builds");
    third.compile("tagger", &rebuilt).expect("compiled");
    let digest = sha256(&rebuilt);
    let code = |dir: &Path| {
        let file = codes(dir).into_iter().find(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&digest))
        });
        fs::read(file.expect("the rebuild's code")).expect("read")
    };
    assert!(code(&cache) == code(&cold), "the same machine code");
    second
        .prepare("tagger", &component)
        .expect("the component links");
}
