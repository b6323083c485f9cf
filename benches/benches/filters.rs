//! Per-object filter cost of the three seed filters — no filter / compiled natively / as wasm
//! through the gateway's filter host — on 2 KB and 20 KB objects, keep and replace (or drop)
//! paths; the cost of a response's instance checkout; and a filter's compile and load time.
//!
//! `cargo bench -p edgegate-benches --bench filters`. The wasm components are
//! `target/filters/NAME.wasm`, built by `tests/build-filters` if missing.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use edgegate::filter::{Generation, Session, check_replacement};
use edgegate::stream::{Pipeline, Transform, Verdict};
use edgegate_benches::drive;
use edgegate_benches::fixtures::list_body;
use edgegate_benches::seeds::{Seed, same_decision, seeds};

/// List items per batch: what the host sends in one `filter-batch` call.
const BATCH: usize = 32;

fn wasm_dir() -> std::path::PathBuf {
    edgegate_testkit::filters::built(&["servicetopology", "masterservice", "discard-cloud-service"])
        .unwrap_or_else(|error| panic!("cannot build the filter components: {error:#}"))
}

fn per_object(c: &mut Criterion) {
    let dir = wasm_dir();
    let rt = drive::runtime();
    for seed in seeds() {
        let generation = seed
            .wasm(&dir, None)
            .unwrap_or_else(|e| panic!("{}: {e:#}", seed.name));
        let mut session = open(&seed, &generation);
        // The native harness installs its fake host on this thread: one seed at a time.
        let native = seed
            .native()
            .unwrap_or_else(|e| panic!("{}: {e:#}", seed.name));
        for case in &seed.cases {
            // Both builds must take the path the case names, with the same result.
            let output = native.filter(&case.bytes);
            let verdict = session
                .apply(&case.bytes)
                .unwrap_or_else(|e| panic!("{}: {}", seed.name, e.message));
            assert!(
                case.path.of_output(&output) && same_decision(&verdict, &output),
                "{} on {} {}: native {output:?}, wasm {verdict:?}",
                seed.name,
                case.object,
                case.path.as_str()
            );
            let objects: Vec<Bytes> = vec![case.bytes.clone(); BATCH];
            let owned: Vec<Vec<u8>> = objects.iter().map(|o| o.to_vec()).collect();
            let list: Vec<Bytes> =
                drive::chunks(&list_body("List", "v1", objects.iter().map(|o| &o[..])));

            let mut group = c.benchmark_group(format!(
                "per_object/{}/{}/{}",
                seed.name,
                case.object,
                case.path.as_str()
            ));
            group.throughput(Throughput::Elements(1));
            group.bench_function("native", |b| {
                b.iter(|| native.filter(black_box(&case.bytes)))
            });
            group.bench_function("wasm", |b| b.iter(|| session.apply(black_box(&case.bytes))));
            // Part of `wasm` on a replace path: the host's check of the replacement.
            if let Verdict::Replace(replacement) = &verdict {
                group.bench_function("replacement_check", |b| {
                    b.iter(|| check_replacement(black_box(&case.bytes), black_box(replacement)))
                });
                // The same check when a filter edits `metadata`: every field after it is read.
                let labelled = with_metadata_edit(&case.bytes);
                assert_eq!(check_replacement(&case.bytes, &labelled), Ok(()));
                group.bench_function("replacement_check_metadata_edit", |b| {
                    b.iter(|| check_replacement(black_box(&case.bytes), black_box(&labelled)))
                });
            }
            group.throughput(Throughput::Elements(BATCH as u64));
            group.bench_function("native_batch", |b| {
                b.iter(|| native.filter_batch(black_box(&owned)))
            });
            group.bench_function("wasm_batch", |b| {
                b.iter(|| session.apply_batch(black_box(&objects)))
            });
            // The floor: the same items through the list pipeline with no filter at all.
            group.bench_function("none_pipeline", |b| {
                b.iter(|| drive::list(&rt, black_box(&list), drive::bare()))
            });
            // The wasm filter in place: the list pipeline with the session as its transform
            // (a session per response, as the gateway does).
            group.bench_function("wasm_pipeline", |b| {
                b.iter_batched(
                    || open(&seed, &generation),
                    |session| {
                        let pipeline = Pipeline {
                            transform: Some(Box::new(session) as Box<dyn Transform>),
                            ..drive::bare()
                        };
                        drive::list(&rt, &list, pipeline)
                    },
                    BatchSize::SmallInput,
                )
            });
            group.finish();
        }
    }
}

/// `object` with a field added first in its `metadata`, as a filter that labels objects
/// would replace it.
fn with_metadata_edit(object: &[u8]) -> Vec<u8> {
    let head = br#""metadata":{"#;
    let Some(at) = object.windows(head.len()).position(|w| w == head) else {
        panic!("the bench objects have metadata");
    };
    let at = at + head.len();
    [&object[..at], br#""labels-edited":"yes","#, &object[at..]].concat()
}

fn open(seed: &Seed, generation: &Generation) -> Session {
    seed.session(generation)
        .unwrap_or_else(|e| panic!("{}: {e:#}", seed.name))
}

/// What a response pays for its filter instance: a session and its first (cheap) call, with
/// the instance from the pool or made fresh (instantiate + configure), against the call alone.
fn checkout(c: &mut Criterion) {
    let dir = wasm_dir();
    let all = seeds();
    let Some(seed) = all.iter().find(|s| s.name == "masterservice") else {
        panic!("masterservice is a seed filter");
    };
    let generation = seed.wasm(&dir, None).unwrap_or_else(|e| panic!("{e:#}"));
    // A Service masterservice is done with after reading its name.
    let tiny = Bytes::from_static(br#"{"metadata":{"name":"x","namespace":"y"}}"#);
    let first_call = |session: &mut Session| {
        session
            .apply(&tiny)
            .unwrap_or_else(|e| panic!("{}", e.message))
    };
    let mut group = c.benchmark_group("checkout/masterservice");
    let mut warm = open(seed, &generation);
    group.bench_function("call_only", |b| b.iter(|| first_call(&mut warm)));
    drop(warm);
    group.bench_function("pooled_instance", |b| {
        b.iter(|| {
            let mut session = open(seed, &generation);
            first_call(&mut session);
        })
    });
    group.bench_function("fresh_instance", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                // Holding as many sessions as the pool keeps idle instances empties it, so
                // each timed session below instantiates and configures a new one.
                let mut held: Vec<Session> = (0..8)
                    .map(|_| {
                        let mut session = open(seed, &generation);
                        first_call(&mut session);
                        session
                    })
                    .collect();
                let round = left.min(64);
                let started = Instant::now();
                for _ in 0..round {
                    let mut session = open(seed, &generation);
                    first_call(&mut session);
                    held.push(session);
                }
                spent += started.elapsed();
                left -= round;
                drop(held);
            }
            spent
        })
    });
    group.finish();
}

/// Loading one filter as the gateway does (engine, compile, link, first instance, manifest,
/// schema check, configure): with nothing stored, and with its compiled code in the store
/// (a restart, or a reload of a file seen before).
fn load(c: &mut Criterion) {
    let dir = wasm_dir();
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    for seed in seeds() {
        group.bench_function(format!("{}/compile", seed.name), |b| {
            b.iter(|| seed.wasm(&dir, None).unwrap_or_else(|e| panic!("{e:#}")))
        });
        let cache = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        seed.wasm(&dir, Some(cache.path()))
            .unwrap_or_else(|e| panic!("{e:#}"));
        group.bench_function(format!("{}/stored", seed.name), |b| {
            b.iter(|| {
                seed.wasm(&dir, Some(cache.path()))
                    .unwrap_or_else(|e| panic!("{e:#}"))
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // Short runs: ~70 benchmarks on two cores. Per-object figures settle within a second.
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = per_object, checkout, load
}
criterion_main!(benches);
