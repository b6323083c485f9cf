//! The compiled-code store maps only code the gateway itself wrote: a directory another user
//! owns or others may write is refused, and code whose seal does not verify under the key
//! in the store (tampered, its seal or key missing, the key replaced or unfit) is compiled
//! again from the `.wasm`, never mapped.

use std::fs::{self, Permissions};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;

use super::support::{TempDir, temp_dir, wasm};
use crate::filter::FilterError;
use crate::filter::metrics::Place;
use crate::filter::runtime::engine::Runtime;
use crate::filter::runtime::seal::KEY_FILE;

/// The store's file of the code compiled from `wasm`.
fn code_file(dir: &Path, wasm: &[u8]) -> PathBuf {
    let digest = crate::filter::runtime::code_store::sha256(wasm);
    fs::read_dir(dir)
        .expect("the store's dir")
        .map(|entry| entry.expect("an entry").path())
        .find(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&digest) && n.ends_with(".cwasm"))
        })
        .expect("the code is stored")
}

/// A store holding the tagger's code, and that code's file.
fn tagger_stored(tag: &str) -> (TempDir, PathBuf) {
    let cache = temp_dir(tag);
    Runtime::new(Some(&*cache), None)
        .expect("the runtime builds")
        .compile("tagger", &wasm("tagger"))
        .expect("compiled");
    let file = code_file(&cache, &wasm("tagger"));
    (cache, file)
}

/// Compiles the tagger in a new runtime on `cache`: where it was compiled (`None`: mapped
/// from the store) and how many stored files were refused.
fn compile_again(cache: &Path) -> (Option<Place>, u64) {
    let rejects = Counter::default();
    let runtime =
        Runtime::new_counted(Some(cache), None, rejects.clone()).expect("the runtime builds");
    let (component, place) = runtime
        .compile("tagger", &wasm("tagger"))
        .expect("compiled");
    runtime
        .prepare("tagger", &component)
        .expect("what is used links");
    (place, rejects.get())
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).expect("metadata").mode() & 0o7777
}

#[test]
fn the_gateway_makes_its_store_and_key_its_own_alone() {
    let scratch = temp_dir("sealed-new");
    let cache = scratch.join("deep").join("_compiled-filters");
    Runtime::new(Some(&cache), None).expect("the runtime builds");
    assert_eq!(mode(&cache), 0o700);
    let key = cache.join(KEY_FILE);
    assert_eq!(mode(&key), 0o600);
    assert_eq!(fs::read(&key).expect("the key").len(), 32);
}

#[test]
fn code_the_gateway_sealed_is_mapped() {
    let (cache, _) = tagger_stored("sealed-mapped");
    assert_eq!(compile_again(&cache), (None, 0));
}

#[test]
fn a_store_another_user_owns_is_refused() {
    let (cache, _) = tagger_stored("sealed-owner");
    std::os::unix::fs::chown(&*cache, Some(4242), None).expect("chown (the tests run as root)");
    let refused = Runtime::new(Some(&cache), None).err();
    assert!(
        matches!(&refused, Some(FilterError::UntrustedStore { reason, .. }) if reason.contains("uid 4242")),
        "{refused:?}"
    );
}

#[test]
fn a_store_others_may_write_is_refused() {
    let (cache, _) = tagger_stored("sealed-writable");
    for writable in [0o777, 0o770, 0o1777, 0o720] {
        fs::set_permissions(&*cache, Permissions::from_mode(writable)).expect("chmod");
        let refused = Runtime::new(Some(&cache), None).err();
        assert!(
            matches!(&refused, Some(FilterError::UntrustedStore { reason, .. }) if reason.contains("writable")),
            "{writable:o}: {refused:?}"
        );
    }
    // Readable by others, as a store made by an earlier gateway is: not refused.
    fs::set_permissions(&*cache, Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(compile_again(&cache), (None, 0));
}

#[test]
fn tampered_code_is_compiled_again_not_mapped() {
    let (cache, file) = tagger_stored("sealed-tampered");
    let ours = fs::read(&file).expect("the code");
    // Code that loads and links as well as the tagger's: another component's, compiled by
    // the same engine, put in the tagger's place.
    let other = Runtime::new(None, None).expect("the runtime builds");
    let foreign = other
        .engine()
        .precompile_component(&wasm("nodestamp"))
        .expect("compiled");
    fs::write(&file, &foreign).expect("tampered");
    assert_eq!(compile_again(&cache), (Some(Place::Gateway), 1));
    assert_eq!(fs::read(&file).expect("stored again"), ours);
    // One byte flipped.
    let mut flipped = ours.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 1;
    fs::write(&file, &flipped).expect("tampered");
    assert_eq!(compile_again(&cache), (Some(Place::Gateway), 1));
    assert_eq!(
        compile_again(&cache),
        (None, 0),
        "the code compiled again is sealed"
    );
}

#[test]
fn code_without_its_seal_is_compiled_again() {
    let (cache, file) = tagger_stored("sealed-no-seal");
    fs::remove_file(file.with_extension("seal")).expect("the seal removed");
    assert_eq!(compile_again(&cache), (Some(Place::Gateway), 1));
    assert_eq!(compile_again(&cache), (None, 0));
}

#[test]
fn code_others_may_write_is_compiled_again() {
    let (cache, file) = tagger_stored("sealed-file-writable");
    fs::set_permissions(&file, Permissions::from_mode(0o666)).expect("chmod");
    assert_eq!(compile_again(&cache), (Some(Place::Gateway), 1));
    assert_eq!(mode(&file), 0o600);
}

#[test]
fn code_sealed_under_another_key_is_compiled_again() {
    let (cache, _) = tagger_stored("sealed-wrong-key");
    let key = cache.join(KEY_FILE);
    fs::write(&key, [7; 32]).expect("another key");
    // The code and the functions the compile would have taken code from are both refused.
    assert_eq!(compile_again(&cache), (Some(Place::Gateway), 2));
    assert_eq!(compile_again(&cache), (None, 0));
}

#[test]
fn a_missing_key_is_made_again_and_old_code_is_compiled_again() {
    let (cache, _) = tagger_stored("sealed-missing-key");
    let key = cache.join(KEY_FILE);
    let old = fs::read(&key).expect("the key");
    fs::remove_file(&key).expect("the key removed");
    assert_eq!(compile_again(&cache), (Some(Place::Gateway), 2));
    assert_ne!(fs::read(&key).expect("a new key"), old);
    assert_eq!(mode(&key), 0o600);
}

/// A way to spoil the key, by name.
type Spoil<'a> = (&'a str, &'a dyn Fn(&Path));

#[test]
fn an_unfit_key_is_replaced_and_old_code_is_compiled_again() {
    let short = |key: &Path| fs::write(key, [1; 16]).expect("written");
    let readable = |key: &Path| {
        fs::set_permissions(key, Permissions::from_mode(0o644)).expect("chmod");
    };
    let foreign = |key: &Path| std::os::unix::fs::chown(key, Some(4242), None).expect("chown");
    let linked = |key: &Path| {
        let target = key.with_file_name("elsewhere");
        fs::rename(key, &target).expect("moved");
        std::os::unix::fs::symlink(&target, key).expect("linked");
    };
    let unfit: [Spoil; 4] = [
        ("short", &short),
        ("readable", &readable),
        ("foreign", &foreign),
        ("symlink", &linked),
    ];
    for (case, spoil) in unfit {
        let (cache, _) = tagger_stored(&format!("sealed-unfit-{case}"));
        let key = cache.join(KEY_FILE);
        let old = fs::read(&key).expect("the key");
        spoil(&key);
        assert_eq!(compile_again(&cache), (Some(Place::Gateway), 2), "{case}");
        let meta = fs::symlink_metadata(&key).expect("a key");
        assert!(meta.is_file(), "{case}");
        assert_eq!(meta.mode() & 0o777, 0o600, "{case}");
        assert_ne!(fs::read(&key).expect("the new key"), old, "{case}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_with_a_refused_store_still_loads_its_filters() {
    let dir = temp_dir("sealed-filters");
    fs::write(dir.join("a.wasm"), wasm("tagger")).expect("written");
    fs::write(dir.join("a.toml"), "[config]\ntag = \"a\"").expect("written");
    let cache = temp_dir("sealed-filters-cache");
    fs::set_permissions(&*cache, Permissions::from_mode(0o777)).expect("chmod");
    let filters = crate::filter::Filters::start_with(
        super::reload::settings(&dir, cache.to_path_buf(), None),
        Arc::new(super::support::TestLookup::default()),
        crate::filter::metrics::FilterMetrics::new(),
    )
    .await
    .expect("filters start without a store");
    assert_eq!(filters.current().filters().len(), 1);
    let stored: Vec<_> = fs::read_dir(&*cache).expect("the dir").collect();
    assert!(stored.is_empty(), "nothing written where others may write");
}
