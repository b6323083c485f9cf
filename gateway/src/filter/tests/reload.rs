//! Hot reload of a real directory: add, change and remove each make a new generation within
//! a second of the rename; a changed `.toml` reuses compiled code; a truncated `.wasm` is
//! rejected while the previous generation keeps serving; temp files are ignored.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::watch;

use super::support::{TempDir, TestLookup, configmap, request, temp_dir, wasm};
use crate::filter::{FilterMetrics, FilterSettings, Filters, Limits};
use crate::stream::{Transform, Verdict};

/// How long a test waits for a generation before it fails: far beyond the one second the
/// behaviour needs, so a loaded CI machine does not make it flaky. The measured figure is
/// printed.
const PATIENCE: Duration = Duration::from_secs(10);

pub(super) fn settings(dir: &Path, cache: PathBuf, config_file: Option<PathBuf>) -> FilterSettings {
    FilterSettings {
        dir: Some(dir.to_owned()),
        config_file,
        compiled_cache_dir: cache,
        helper: None,
        after_load: None,
        node_name: "edge-1".into(),
        node_pool: None,
        limits: Limits::default(),
        debounce: crate::filter::DEFAULT_DEBOUNCE,
        disabled: Vec::new(),
    }
}

/// Writes a file beside its final name, then renames it in place; returns the rename time.
fn put(dir: &Path, name: &str, bytes: &[u8]) -> Instant {
    let temp = dir.join(format!(".{name}.part"));
    std::fs::write(&temp, bytes).unwrap();
    std::fs::rename(&temp, dir.join(name)).unwrap();
    Instant::now()
}

/// Waits for the next generation number; returns it and how long it took since `since`.
async fn next_generation(numbers: &mut watch::Receiver<u64>, since: Instant) -> (u64, Duration) {
    tokio::time::timeout(PATIENCE, numbers.changed())
        .await
        .expect("a new generation in time")
        .expect("the filter host is running");
    (*numbers.borrow_and_update(), since.elapsed())
}

fn trail(filters: &Filters) -> Option<String> {
    let mut session = filters
        .current()
        .session(&request("list", "/api/v1/configmaps"), "test")?;
    match session.apply(&configmap("c", json!({}))).unwrap() {
        Verdict::Replace(bytes) => {
            let object: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            Some(
                object["metadata"]["annotations"]["edgegate.test/trail"]
                    .as_str()?
                    .to_owned(),
            )
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// A filter host on a fresh directory holding tagger `a` (tag "a"), its metrics, the
/// directory and the host's compiled cache; `tune` adjusts the settings.
async fn tagger_host(
    name: &str,
    tune: impl FnOnce(FilterSettings) -> FilterSettings,
) -> (Filters, FilterMetrics, TempDir, TempDir) {
    let dir = temp_dir(name);
    std::fs::write(dir.join("a.toml"), "[config]\ntag = \"a\"").unwrap();
    std::fs::write(dir.join("a.wasm"), wasm("tagger")).unwrap();
    let metrics = FilterMetrics::new();
    let cache = temp_dir(&format!("{name}-cache"));
    let filters = Filters::start_with(
        tune(settings(&dir, cache.to_path_buf(), None)),
        Arc::new(TestLookup::default()),
        metrics.clone(),
    )
    .await
    .unwrap();
    (filters, metrics, dir, cache)
}

/// Waits until a load has failed.
async fn a_load_failed(metrics: &FilterMetrics, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    while metrics.load_failures.get() == 0 {
        assert!(Instant::now() < deadline, "{what} was never loaded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_change_and_remove_each_make_a_generation() {
    let dir = temp_dir("reload");
    let tagger = wasm("tagger");
    std::fs::write(dir.join("a.toml"), "[config]\ntag = \"a\"").unwrap();
    std::fs::write(dir.join("a.wasm"), &tagger).unwrap();
    let cache = temp_dir("reload-cache");
    let filters = Filters::start_with(
        settings(&dir, cache.to_path_buf(), None),
        Arc::new(TestLookup::default()),
        FilterMetrics::new(),
    )
    .await
    .unwrap();
    assert_eq!(filters.current().number(), 1);
    assert_eq!(trail(&filters).as_deref(), Some("a"));
    let mut numbers = filters.subscribe();
    let runtime = Arc::clone(&filters.shared.loader.runtime);
    let compiled = runtime.compiles();

    // Let the start-up settle, so each figure below is one reload's.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!numbers.has_changed().unwrap());

    // Add: the toml first (a lone toml changes nothing), then the wasm by rename.
    std::fs::write(dir.join("b.toml"), "priority = 5\n[config]\ntag = \"b\"").unwrap();
    let renamed = put(&dir, "b.wasm", &tagger);
    let (number, took) = next_generation(&mut numbers, renamed).await;
    println!("reload after adding b.wasm: {took:?}");
    assert_eq!(trail(&filters).as_deref(), Some("a,b"));
    assert_eq!(
        runtime.compiles(),
        compiled,
        "the same bytes are not compiled again"
    );
    let held = filters.current();

    // Change a's config only: compiled code is reused.
    let renamed = put(&dir, "a.toml", b"priority = 9\n[config]\ntag = \"A\"");
    let (number2, took) = next_generation(&mut numbers, renamed).await;
    println!("reload after changing a.toml: {took:?}");
    assert_eq!(number2, number + 1);
    assert_eq!(trail(&filters).as_deref(), Some("b,A"));
    assert_eq!(
        runtime.compiles(),
        compiled,
        "a config change reuses the compiled code"
    );

    // Change a's code: compiled once.
    let renamed = put(&dir, "a.wasm", &wasm("trapper"));
    let (_, took) = next_generation(&mut numbers, renamed).await;
    println!("reload after replacing a.wasm: {took:?}");
    assert_eq!(runtime.compiles(), compiled + 1);

    // Remove.
    let removed = Instant::now();
    std::fs::remove_file(dir.join("b.wasm")).unwrap();
    let (_, took) = next_generation(&mut numbers, removed).await;
    println!("reload after removing b.wasm: {took:?}");
    assert_eq!(filters.current().names(), ["a"]);

    // A response that started earlier still runs on its generation.
    let mut old = held
        .session(&request("list", "/api/v1/configmaps"), "test")
        .unwrap();
    assert!(matches!(
        old.apply(&configmap("c", json!({}))).unwrap(),
        Verdict::Replace(_)
    ));
}

/// A rescan reads the whole directory, so it can load a file whose own change was not yet
/// reported; that file removed at once must still go. Laid out so that `b.toml`'s change
/// wakes the rescan that loads `b.wasm`, renamed in after it, and `b.wasm` is removed as
/// soon as it serves: a watch that cancels a file's "created" with its "removed" (as
/// notify-debouncer-full does within its window) would leave `b` serving for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_removed_as_soon_as_it_serves_goes() {
    let (filters, _metrics, dir, _cache) = tagger_host("reload-quick", |s| s).await;
    let mut numbers = filters.subscribe();
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(dir.join("b.toml"), "[config]\ntag = \"b\"").unwrap();
    tokio::time::sleep(crate::filter::DEFAULT_DEBOUNCE * 6 / 10).await;
    let renamed = put(&dir, "b.wasm", &wasm("tagger"));
    let (_, took) = next_generation(&mut numbers, renamed).await;
    println!("b serving {took:?} after its rename");
    assert_eq!(filters.current().names(), ["a", "b"]);
    let removed = Instant::now();
    std::fs::remove_file(dir.join("b.wasm")).unwrap();
    let (_, took) = next_generation(&mut numbers, removed).await;
    println!("b gone {took:?} after its removal");
    assert_eq!(filters.current().names(), ["a"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_wasm_is_rejected_and_the_previous_generation_keeps_serving() {
    let (filters, metrics, dir, _cache) = tagger_host("reload-bad", |s| s).await;
    let tagger = wasm("tagger");
    let numbers = filters.subscribe();

    // Temp files and dotfiles are ignored.
    std::fs::write(dir.join("c.wasm.tmp"), &tagger[..100]).unwrap();
    std::fs::write(dir.join(".c.wasm"), &tagger[..100]).unwrap();
    put(&dir, "b.wasm", &tagger[..tagger.len() / 2]);
    a_load_failed(&metrics, "the bad file").await;
    assert_eq!(filters.current().number(), 1);
    assert!(!numbers.has_changed().unwrap());
    assert_eq!(trail(&filters).as_deref(), Some("a"));
    let described = filters.describe();
    let error = described["lastLoadError"]["message"].as_str().unwrap();
    assert!(
        error.contains("filter b") && error.contains("compile"),
        "{error}"
    );
    assert_eq!(described["lastLoadError"]["filter"], "b");
    assert_eq!(described["generation"], 1);
    let b = described["filters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "b")
        .unwrap();
    assert_eq!(b["status"], "failed");

    // Fixing the file loads it.
    let mut numbers = numbers;
    let renamed = put(&dir, "b.wasm", &tagger);
    std::fs::write(dir.join("b.toml"), "priority = 1\n[config]\ntag = \"b\"").unwrap();
    next_generation(&mut numbers, renamed).await;
    // The toml may land in the same or the next generation.
    let deadline = Instant::now() + PATIENCE;
    while trail(&filters).as_deref() != Some("a,b") {
        assert!(
            Instant::now() < deadline,
            "b never loaded: {:?}",
            filters.describe()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(filters.describe()["lastLoadError"].is_null());
}

static LOADS_SEEN: AtomicUsize = AtomicUsize::new(0);

fn count_load() {
    LOADS_SEEN.fetch_add(1, Ordering::SeqCst);
}

/// Waits until the hook has seen `loads` loads (it runs just after a generation is swapped in).
async fn loads_seen(loads: usize) {
    let deadline = Instant::now() + PATIENCE;
    while LOADS_SEEN.load(Ordering::SeqCst) < loads {
        assert!(Instant::now() < deadline, "the hook saw no load {loads}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(LOADS_SEEN.load(Ordering::SeqCst), loads);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_after_load_hook_runs_after_each_load_good_or_bad_and_only_then() {
    let (filters, metrics, dir, _cache) = tagger_host("reload-hook", |s| FilterSettings {
        after_load: Some(count_load),
        ..s
    })
    .await;
    assert_eq!(LOADS_SEEN.load(Ordering::SeqCst), 1, "the first load");
    let mut numbers = filters.subscribe();

    let renamed = put(&dir, "a.toml", b"[config]\ntag = \"b\"");
    next_generation(&mut numbers, renamed).await;
    loads_seen(2).await;

    put(&dir, "a.toml", b"[config]\ntag = 7");
    loads_seen(3).await;
    assert_eq!(metrics.load_failures.get(), 1, "the third load failed");

    // A file that changes nothing the loader reads makes no load.
    std::fs::write(dir.join("notes.txt"), "not a filter").unwrap();
    filters.shared.reload();
    assert_eq!(LOADS_SEEN.load(Ordering::SeqCst), 3, "no load, no call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reverting_a_bad_edit_clears_its_load_error_without_a_generation() {
    let (filters, metrics, dir, _cache) = tagger_host("reload-revert", |s| s).await;
    let numbers = filters.subscribe();

    put(&dir, "a.toml", b"[config]\ntag = 7");
    a_load_failed(&metrics, "the bad config").await;
    let error = filters.describe()["lastLoadError"]["message"].to_string();
    assert!(error.contains("/tag"), "{error}");

    put(&dir, "a.toml", b"[config]\ntag = \"a\"");
    let deadline = Instant::now() + PATIENCE;
    while !filters.describe()["lastLoadError"].is_null() {
        assert!(
            Instant::now() < deadline,
            "the reverted edit still shows: {}",
            filters.describe()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!numbers.has_changed().unwrap(), "nothing new to load");
    assert_eq!(trail(&filters).as_deref(), Some("a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_config_file_is_watched_and_a_configmap_swap_is_followed() {
    let root = temp_dir("reload-cm");
    let dir = root.join("filters");
    std::fs::create_dir_all(&dir).unwrap();
    let config = root.join("filters.toml");
    std::fs::write(&config, "").unwrap();
    // A ConfigMap mount: files are links into `..data`, itself a link to a timestamped dir.
    let version = |n: u32, tag: &str| {
        let data = dir.join(format!("..v{n}"));
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("t.wasm"), wasm("tagger")).unwrap();
        std::fs::write(data.join("t.toml"), format!("[config]\ntag = \"{tag}\"")).unwrap();
        std::os::unix::fs::symlink(format!("..v{n}"), dir.join("..data_tmp")).unwrap();
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
        Instant::now()
    };
    version(1, "one");
    std::os::unix::fs::symlink("..data/t.wasm", dir.join("t.wasm")).unwrap();
    std::os::unix::fs::symlink("..data/t.toml", dir.join("t.toml")).unwrap();
    let filters = Filters::start_with(
        settings(&dir, root.join("cache"), Some(config.clone())),
        Arc::new(TestLookup::default()),
        FilterMetrics::new(),
    )
    .await
    .unwrap();
    assert_eq!(trail(&filters).as_deref(), Some("one"));
    let mut numbers = filters.subscribe();

    let swapped = version(2, "two");
    let (_, took) = next_generation(&mut numbers, swapped).await;
    println!("reload after a ConfigMap-style ..data swap: {took:?}");
    assert_eq!(trail(&filters).as_deref(), Some("two"));

    let renamed = put(&root, "filters.toml", b"disabled = [\"*\"]");
    let (_, took) = next_generation(&mut numbers, renamed).await;
    println!("reload after changing the gateway config: {took:?}");
    assert!(filters.current().names().is_empty());
    assert_eq!(filters.describe()["filters"][0]["status"], "disabled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_the_command_line_disables_are_not_loaded() {
    let (filters, _metrics, _dir, _cache) = tagger_host("cli-disabled", |s| FilterSettings {
        disabled: vec!["A".into()],
        ..s
    })
    .await;
    assert_eq!(trail(&filters), None);
    let described = filters.describe().to_string();
    assert!(described.contains(r#""status":"disabled""#), "{described}");
    let (filters, _metrics, _dir, _cache) = tagger_host("cli-enabled", |s| FilterSettings {
        disabled: vec!["b".into()],
        ..s
    })
    .await;
    assert_eq!(trail(&filters).as_deref(), Some("a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yurt_hub_cfg_components_make_a_generation_when_they_change_what_filters_apply_to() {
    let (filters, _metrics, _dir, _cache) = tagger_host("reload-hubcfg", |s| s).await;
    let applies = |component: &str| {
        filters.current().filters()[0]
            .effective
            .components
            .contains(component)
    };
    let first = filters.current().number();
    assert!(!applies("nginx-ingress"));
    let nginx = |name: &str| {
        [(name.to_owned(), vec!["nginx-ingress".to_owned()])]
            .into_iter()
            .collect::<crate::filter::HubComponents>()
    };
    filters.set_hub_components(nginx("A")).await;
    assert_eq!(filters.current().number(), first + 1);
    assert!(applies("nginx-ingress"), "named as YurtHub compares names");
    filters.set_hub_components(nginx("A")).await;
    assert_eq!(filters.current().number(), first + 1, "nothing changed");
    filters.set_hub_components(Default::default()).await;
    assert_eq!(filters.current().number(), first + 2);
    assert!(!applies("nginx-ingress"));
    // A key for a filter this node lacks (another node's) loads nothing.
    filters.set_hub_components(nginx("other")).await;
    assert_eq!(filters.current().number(), first + 2);
    assert!(!applies("nginx-ingress"));
}
