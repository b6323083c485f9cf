//! Filters the cluster declares, handed to the host beside the directory's: each loads and
//! is reported loaded; the directory's filter of the same name wins and the declared one is
//! reported overridden; one that breaks the load is reported failed as its own failure,
//! while the previous generation serves.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::reload::settings;
use super::support::{TestLookup, temp_dir, wasm};
use crate::filter::{DeclaredFilter, DeclaredStatus, FilterMetrics, Filters};

fn declared(filter: &str, toml: &str) -> DeclaredFilter {
    DeclaredFilter {
        component: wasm(filter),
        toml: toml.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_filters_load_beside_the_directory_which_wins_by_name() {
    let dir = temp_dir("declared");
    std::fs::write(dir.join("local.toml"), "[config]\ntag = \"dir\"").unwrap();
    std::fs::write(dir.join("local.wasm"), wasm("tagger")).unwrap();
    let cache = temp_dir("declared-cache");
    let filters = Filters::start_with(
        settings(&dir, cache.to_path_buf(), None),
        Arc::new(TestLookup::default()),
        FilterMetrics::new(),
    )
    .await
    .unwrap();
    assert_eq!(filters.current().names(), ["local"]);

    let set = BTreeMap::from([
        (
            "fleet".to_owned(),
            declared("tagger", "[config]\ntag = \"cluster\""),
        ),
        (
            "local".to_owned(),
            declared("tagger", "[config]\ntag = \"cluster\""),
        ),
    ]);
    let states = filters.set_declared(set).await;
    assert_eq!(states["fleet"].status, DeclaredStatus::Loaded);
    assert_eq!(states["local"].status, DeclaredStatus::Overridden);
    let current = filters.current();
    let mut names = current.names();
    names.sort_unstable();
    assert_eq!(names, ["fleet", "local"]);
    let described = filters.describe();
    let source = |name: &str| {
        described["filters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .map(|f| f["source"].clone())
    };
    assert_eq!(source("fleet").unwrap(), "cluster");
    assert_eq!(source("local").unwrap(), "directory");

    // A config its schema refuses: the load fails on that filter, the last generation serves.
    let generation = filters.current().number();
    let bad = BTreeMap::from([("fleet".to_owned(), declared("tagger", "[config]\ntag = 7"))]);
    let states = filters.set_declared(bad).await;
    assert_eq!(states["fleet"].status, DeclaredStatus::Failed);
    assert!(states["fleet"].its_own);
    assert!(
        states["fleet"].error.as_deref().unwrap().contains("fleet"),
        "{:?}",
        states["fleet"]
    );
    assert_eq!(filters.current().number(), generation);

    // Declared no more: only the directory's filter runs.
    let states = filters.set_declared(BTreeMap::new()).await;
    assert!(states.is_empty());
    assert_eq!(filters.current().names(), ["local"]);
}
