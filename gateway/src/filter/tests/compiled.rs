//! The compiled-code store: what is compiled once is mapped after, damaged or foreign code
//! is compiled again, and pruning keeps what is live and what was used last.

use std::fs::{self, File, FileTimes};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::support::{temp_dir, wasm};
use crate::filter::child::Place;
use crate::filter::compiled::CompiledStore;
use crate::filter::dir::sha256;
use crate::filter::engine::Runtime;

/// The store's files of compiled code, by name.
fn stored(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("the store's dir")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    files.sort();
    files
}

/// A store in a fresh directory holding the tagger, the runtime that compiled it, and its file.
fn tagger_stored(tag: &str) -> (PathBuf, Arc<Runtime>, PathBuf) {
    let cache = temp_dir(tag);
    let runtime = Runtime::new(Some(&cache), None).expect("the runtime builds");
    runtime
        .compile("tagger", &wasm("tagger"))
        .expect("compiled");
    let file = stored(&cache).remove(0);
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
    let first = Runtime::new(Some(&cache), None).expect("the runtime builds");
    let (_, place) = first.compile("tagger", &wasm("tagger")).expect("compiled");
    assert_eq!(place, Some(Place::Gateway));
    let files = stored(&cache);
    assert_eq!(files.len(), 1, "one file, no temporary left: {files:?}");
    let name = files[0].file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(
        name.starts_with(&sha256(&wasm("tagger"))) && name.ends_with(".cwasm"),
        "{name}"
    );

    let second = Runtime::new(Some(&cache), None).expect("the runtime builds");
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
        let runtime = Runtime::new(Some(&cache), None).expect("the runtime builds");
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
    let ours = Runtime::new(Some(&cache), None).expect("the runtime builds");
    let other_engine = wasmtime::Engine::new(&wasmtime::Config::new()).expect("an engine");
    let other = CompiledStore::open(&cache, &other_engine).expect("the store opens");
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
        stored(&cache).len(),
        2,
        "each engine's code has its own file"
    );
}

#[test]
fn pruning_keeps_live_and_recently_used_code_and_deletes_the_rest() {
    let cache = temp_dir("compiled-prune");
    let engine = wasmtime::Engine::new(&wasmtime::Config::new()).expect("an engine");
    let store = CompiledStore::open(&cache, &engine).expect("the store opens");
    let day = Duration::from_secs(24 * 3600);
    let [live, newest, newer, oldest] = [b"live".as_slice(), b"newest", b"newer", b"oldest"]
        .map(|wasm| store.store(&sha256(wasm), b"code").expect("stored"));
    for (file, days) in [(&live, 30), (&newer, 2), (&oldest, 3)] {
        age(file, day * days);
    }
    let other_version = cache.join(format!("{}-0123456789abcdef.cwasm", sha256(b"live")));
    let abandoned = cache.join(".abandoned.cwasm.1.tmp");
    let writing = cache.join(".writing.cwasm.2.tmp");
    let foreign = cache.join("README");
    for file in [&other_version, &abandoned, &writing, &foreign] {
        fs::write(file, b"bytes").expect("written");
    }
    for file in [&other_version, &abandoned, &foreign] {
        age(file, day);
    }

    let deleted = store.prune([sha256(b"live").as_str()], 2).expect("pruned");
    assert_eq!(
        deleted, 3,
        "the oldest unused, the other version's and the abandoned"
    );
    let mut left = vec![live, newest, newer, writing, foreign];
    left.sort();
    assert_eq!(stored(&cache), left);
    assert!(!oldest.exists() && !other_version.exists() && !abandoned.exists());
}

#[test]
fn loading_marks_code_as_used() {
    let (_, runtime, file) = tagger_stored("compiled-touch");
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
