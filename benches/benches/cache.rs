//! The cache: commit throughput (objects/s) of a streamed 10 000-object list through the
//! tee, the one writer and the redb store, until it is durable — a re-list of an unchanged
//! set, and one where every object changed; a watch fan-out, where ten watches of one set
//! tee the same 1 000 events, as a node's clients watching one resource do; and an offline
//! LIST of those 10 000 cached objects read back as the local proxy does (goal ≤ 50 ms).
//!
//! `cargo bench -p edgegate-benches --bench cache`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use edgegate::cache::{
    self, Cache, CacheMetrics, CachePolicy, RedbStore, ResourceKey, Scope, SetKey,
};
use edgegate::stream::{Event, EventType, ListEnd, ListSink, WatchSink};
use edgegate_benches::fixtures::slices;

/// Objects in the list: the size the issue names.
const OBJECTS: usize = 10_000;
/// Watches of the fan-out bench, and the events each receives.
const WATCHES: usize = 10;
const EVENTS: usize = 1_000;
/// Bytes a bench lets wait for the writer at most: well under the writer's in-flight
/// bounds (1 MiB for a set's first list, 4 MiB for a re-list), which the gateway's list
/// pipeline keeps to by waiting for room (a first list) or giving the list up (a re-list).
const AHEAD: u64 = 512 << 10;

fn resource() -> ResourceKey {
    ResourceKey {
        component: "kube-proxy".into(),
        resource: "endpointslices".into(),
        version: "v1".into(),
        group: "discovery.k8s.io".into(),
    }
}

/// Streams `objects` as one list into the cache and waits until it is committed durably.
fn commit(cache: &Arc<Cache>, objects: &[Bytes]) {
    let commits = cache.metrics().commits.get();
    let mut tee = cache
        .list_tee(SetKey::new(resource(), "", "", ""), None)
        .unwrap_or_else(|| panic!("a first page is always teed"));
    let mut sent = cache.metrics().bytes.get();
    for object in objects {
        // Paced as a network would be: never more than AHEAD bytes ahead of the writer.
        while sent.saturating_sub(cache.metrics().bytes.get()) > AHEAD {
            std::thread::yield_now();
        }
        tee.list_item(object);
        sent += object.len() as u64;
    }
    tee.list_end(ListEnd {
        kind: "EndpointSliceList".into(),
        api_version: "discovery.k8s.io/v1".into(),
        resource_version: "4242".into(),
        continue_token: String::new(),
    });
    drop(tee);
    cache.flush();
    assert_eq!(
        (cache.metrics().commits.get(), cache.metrics().refused.get()),
        (commits + 1, 0),
        "the list was committed whole"
    );
}

/// The same objects at later resourceVersions.
fn next_versions(objects: &[Bytes]) -> Vec<Bytes> {
    objects
        .iter()
        .map(|object| {
            let value: serde_json::Value =
                serde_json::from_slice(object).unwrap_or_else(|e| panic!("{e}"));
            let rv = value["metadata"]["resourceVersion"].as_str().unwrap_or("0");
            at_version(&value, &format!("{rv}1"))
        })
        .collect()
}

/// `object` at resourceVersion `version`, encoded.
fn at_version(object: &serde_json::Value, version: &str) -> Bytes {
    let mut object = object.clone();
    object["metadata"]["resourceVersion"] = serde_json::Value::String(version.to_owned());
    Bytes::from(serde_json::to_vec(&object).unwrap_or_else(|e| panic!("{e}")))
}

/// [`EVENTS`] modifications of `object`, at versions from `first` on.
fn modifications(object: &serde_json::Value, first: u64) -> Vec<Event> {
    (first..first + EVENTS as u64)
        .map(|version| Event {
            kind: EventType::Modified,
            object: at_version(object, &version.to_string()),
        })
        .collect()
}

/// Tees each event to every watch in turn, as the gateway's pipelines of [`WATCHES`]
/// watches of one set do, and waits until the writer has stored them durably.
fn fan_out(cache: &Arc<Cache>, events: &[Event]) {
    let mut tees: Vec<_> = (0..WATCHES)
        .map(|_| cache.watch_tee(SetKey::new(resource(), "", "", "")))
        .collect();
    let refused = cache.metrics().refused.get();
    let mut sent = cache.metrics().bytes.get();
    for event in events {
        for tee in &mut tees {
            while sent.saturating_sub(cache.metrics().bytes.get()) > AHEAD {
                std::thread::yield_now();
            }
            tee.event(event);
            sent += event.object.len() as u64;
        }
    }
    drop(tees);
    cache.flush();
    assert_eq!(
        cache.metrics().refused.get(),
        refused,
        "every event was written"
    );
}

fn caching(c: &mut Criterion) {
    let objects = slices(OBJECTS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = Arc::new(RedbStore::open(dir.path()).unwrap_or_else(|e| panic!("{e}")));
    let cache = Cache::start(
        store.clone(),
        CachePolicy::new(&["*"]),
        CacheMetrics::default(),
    );

    // The offline list reads what a first commit left, whichever bench runs first.
    commit(&cache, &objects);
    let mut group = c.benchmark_group("cache");
    group.sample_size(10);
    group.throughput(Throughput::Elements(OBJECTS as u64));
    // Each list replaces the set the previous one committed: the steady state of a re-list.
    group.bench_function("commit_10000_unchanged", |b| {
        b.iter_custom(|iters| {
            let started = Instant::now();
            for _ in 0..iters {
                commit(&cache, &objects);
            }
            started.elapsed()
        })
    });
    // Lists alternate between two versions of every object: each commit rewrites them all.
    let changed = next_versions(&objects);
    group.bench_function("commit_10000_changed", |b| {
        b.iter_custom(|iters| {
            let started = Instant::now();
            for i in 0..iters {
                commit(&cache, if i % 2 == 0 { &changed } else { &objects });
            }
            started.elapsed()
        })
    });
    // Every iteration's events are new versions, as a live watch's are.
    let watched: serde_json::Value =
        serde_json::from_slice(&objects[0]).unwrap_or_else(|e| panic!("{e}"));
    let mut version = 1_000_000;
    group.throughput(Throughput::Elements((WATCHES * EVENTS) as u64));
    group.bench_function("watch_fan_out_10x1000", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let events = modifications(&watched, version);
                version += EVENTS as u64;
                let started = Instant::now();
                fan_out(&cache, &events);
                spent += started.elapsed();
            }
            spent
        })
    });
    group.throughput(Throughput::Elements(OBJECTS as u64));
    commit(&cache, &objects);
    group.bench_function("offline_list_10000", |b| {
        b.iter(|| offline_list(store.as_ref()))
    });
    group.finish();
    cache.close();
}

/// An offline LIST of everything cached: the store read in key order into 64 KiB body
/// chunks, as the local proxy streams it; returns the body size.
fn offline_list(store: &dyn cache::Store) -> usize {
    let scope = Scope {
        namespace: "",
        labels: "",
        fields: "",
    };
    let listing = cache::list(store, &resource(), scope).unwrap_or_else(|e| panic!("{e}"));
    let mut chunk = BytesMut::with_capacity(64 << 10);
    let (mut size, mut items) = (0, 0);
    chunk.extend_from_slice(br#"{"kind":"EndpointSliceList","items":["#);
    for item in listing.items {
        let item = item.unwrap_or_else(|e| panic!("{e}"));
        if items > 0 {
            chunk.extend_from_slice(b",");
        }
        chunk.extend_from_slice(&item);
        items += 1;
        if chunk.len() >= 64 << 10 {
            size += black_box(chunk.split().freeze()).len();
        }
    }
    chunk.extend_from_slice(b"]}");
    size += chunk.len();
    assert_eq!(items, OBJECTS);
    size
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = caching
}
criterion_main!(benches);
