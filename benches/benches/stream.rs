//! Stream framing throughput (MB/s) on a 50 MB body: `ListFramer` and `WatchFramer` alone,
//! and the whole `stream::list` / `stream::watch` pipelines with no filter and no tee (the
//! floor every framed response pays); and the read of an object's identity and version that
//! every filtered and cached watch event pays; and the copy of what a filtered watch's client
//! was shown, held once for all the streams that show the same bytes, against a copy of
//! its own.
//!
//! `cargo bench -p edgegate-benches --bench stream`.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use edgegate::stream::{ListFrame, ListFramer, Meta, WatchFramer, held};
use edgegate_benches::drive;
use edgegate_benches::fixtures::{list_body, slices, watch_body};

/// The body size the issue asks for: a large list of a big cluster.
const BODY_BYTES: usize = 50 << 20;

/// 2 KB EndpointSlices, as many as make [`BODY_BYTES`].
fn objects() -> Vec<Bytes> {
    let one = slices(1)[0].len();
    slices(BODY_BYTES / (one + 1) + 1)
}

fn framing(c: &mut Criterion) {
    let objects = objects();
    let list = drive::chunks(&list_body(
        "EndpointSliceList",
        "discovery.k8s.io/v1",
        objects.iter().map(|o| &o[..]),
    ));
    let watch = drive::chunks(&watch_body(objects.iter().map(|o| &o[..])));
    let size = |chunks: &[Bytes]| chunks.iter().map(Bytes::len).sum::<usize>() as u64;
    let rt = drive::runtime();

    let mut group = c.benchmark_group("stream");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(size(&list)));
    group.bench_function("list_framer_50MB", |b| {
        b.iter(|| {
            let mut framer = ListFramer::new();
            let mut items = 0usize;
            for chunk in &list {
                framer.push(black_box(chunk));
                while let Some(frame) = framer.next_frame().unwrap_or(None) {
                    items += usize::from(matches!(frame, ListFrame::Item(_)));
                }
            }
            assert!(matches!(framer.finish(), Ok(Some(ListFrame::Tail(_)))));
            items
        })
    });
    group.bench_function("list_pipeline_50MB", |b| {
        b.iter(|| drive::list(&rt, black_box(&list), drive::bare()))
    });
    group.throughput(Throughput::Bytes(size(&watch)));
    group.bench_function("watch_framer_50MB", |b| {
        b.iter(|| {
            let mut framer = WatchFramer::new();
            let mut events = 0usize;
            for chunk in &watch {
                framer.push(black_box(chunk));
                while let Ok(Some(_)) = framer.next_frame() {
                    events += 1;
                }
            }
            events
        })
    });
    group.bench_function("watch_pipeline_50MB", |b| {
        b.iter(|| drive::watch(&rt, black_box(&watch), drive::bare()))
    });
    group.finish();
}

/// Reading an object's identity and version (its metadata's name, namespace and
/// resourceVersion), which the gateway does for every watch event it filters and caches:
/// from bytes already checked, and by a parse of unchecked bytes, on a 2 KB EndpointSlice
/// as kube-apiserver writes it (`managedFields` last in `metadata`).
fn metadata(c: &mut Criterion) {
    let object = slices(1).remove(0);
    let mut group = c.benchmark_group("object_meta_2KB");
    group.throughput(Throughput::Elements(1));
    group.bench_function("checked", |b| {
        b.iter(|| Meta::parse_checked(black_box(&object)).map(|meta| meta.name.len()))
    });
    group.bench_function("parse", |b| {
        b.iter(|| Meta::parse(black_box(&object)).map(|meta| meta.name.len()))
    });
    group.finish();
}

/// The copy a filtered watch stream keeps of what its client was shown of a 2 KB
/// EndpointSlice: held (another stream holds the same bytes, as on a node whose clients
/// watch the same objects), against a copy of its own.
fn shown_copy(c: &mut Criterion) {
    let object = slices(1).remove(0);
    let _other_stream = held(&object);
    let mut group = c.benchmark_group("shown_copy_2KB");
    group.throughput(Throughput::Elements(1));
    group.bench_function("own", |b| {
        b.iter(|| Bytes::copy_from_slice(black_box(&object)))
    });
    group.bench_function("held", |b| b.iter(|| held(black_box(&object))));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = framing, metadata, shown_copy
}
criterion_main!(benches);
