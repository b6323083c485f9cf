//! `edgegate filter bench`: what a filter costs per object, measured through the gateway's
//! own filter host (the call, the copies in and out, the check of every replacement) on the
//! objects an author gives it, exactly as they are written: batched as the gateway filters
//! a list, and one call per object as it filters a watch's events one by one.

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;

use super::harness::{TestRequest, failed, kind_of, open, parse_verb};
use super::input::Input;
use crate::filter::error::FilterError;
use crate::stream::{BATCH, Transform, Verdict};

/// The longest a bench may be asked to measure each way of calling, in seconds.
const MAX_SECONDS: f64 = 600.0;

/// Runs a component on the objects of `input` (one object, or a `…List`'s items) over and
/// over for about `seconds` each way of calling, and reports the time per object with the
/// decisions taken. One session serves every call, as one serves a watch; the first pass is
/// not timed (it makes the instance and grows its memory).
pub fn bench(request: &TestRequest, input: &[u8], seconds: f64) -> Result<String, FilterError> {
    if !(seconds > 0.0 && seconds <= MAX_SECONDS) {
        return Err(FilterError::Input(format!(
            "--seconds must be above 0 and at most {MAX_SECONDS}, not {seconds}"
        )));
    }
    let verb = parse_verb(&request.verb)?;
    let objects = objects(input)?;
    let mut session = open(request, verb)?;
    let budget = Duration::from_secs_f64(seconds);

    let verdicts = batched(&mut session, &objects)?;
    let count = |kind: &str| verdicts.iter().filter(|v| kind_of(v) == kind).count();
    let decisions = Decisions {
        keep: count("keep"),
        replace: count("replace"),
        drop: count("drop"),
    };
    let calls_per_pass = objects.len().div_ceil(BATCH);
    let batch = timed(budget, objects.len(), calls_per_pass, || {
        batched(&mut session, &objects).map(drop)
    })?;
    let mut single_pass = || {
        objects
            .iter()
            .try_for_each(|object| session.apply(object).map(drop).map_err(failed))
    };
    single_pass()?;
    let single = timed(budget, objects.len(), objects.len(), single_pass)?;
    let report = Report {
        objects: objects.len(),
        instance_memory_bytes: session.instance_memory_bytes(),
        decisions,
        batched: Way {
            objects_per_call: Some(BATCH.min(objects.len())),
            ..batch
        },
        single,
    };
    // Serialising plain numbers cannot fail.
    Ok(serde_json::to_string_pretty(&report).unwrap_or_default())
}

/// What `edgegate filter bench` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    objects: usize,
    /// The linear memory the filter's instance grew to.
    instance_memory_bytes: u64,
    decisions: Decisions,
    batched: Way,
    single: Way,
}

/// How many objects the filter kept, replaced and dropped.
#[derive(Serialize)]
struct Decisions {
    keep: usize,
    replace: usize,
    drop: usize,
}

/// The figures of one way of calling.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Way {
    #[serde(skip_serializing_if = "Option::is_none")]
    objects_per_call: Option<usize>,
    calls: u64,
    us_per_object: f64,
}

/// The objects to measure, each as its bytes in `input`.
fn objects(input: &[u8]) -> Result<Vec<Bytes>, FilterError> {
    let objects: Vec<Bytes> = Input::read(input)?
        .objects()
        .iter()
        .map(|object| Bytes::copy_from_slice(object.get().as_bytes()))
        .collect();
    if objects.is_empty() {
        return Err(FilterError::Input(
            "the list has no items to measure".into(),
        ));
    }
    Ok(objects)
}

/// One pass over `objects`, [`BATCH`] per call, as the gateway filters a list.
fn batched(session: &mut impl Transform, objects: &[Bytes]) -> Result<Vec<Verdict>, FilterError> {
    let mut verdicts = Vec::with_capacity(objects.len());
    for chunk in objects.chunks(BATCH) {
        verdicts.extend(session.apply_batch(chunk).map_err(failed)?);
    }
    Ok(verdicts)
}

/// Runs `pass` (over `objects` objects, in `calls` calls) until `budget` has passed.
fn timed(
    budget: Duration,
    objects: usize,
    calls: usize,
    mut pass: impl FnMut() -> Result<(), FilterError>,
) -> Result<Way, FilterError> {
    let start = Instant::now();
    let mut passes = 0u64;
    while passes == 0 || start.elapsed() < budget {
        pass()?;
        passes += 1;
    }
    let elapsed = start.elapsed();
    let per_object_us = elapsed.as_secs_f64() * 1e6 / (passes as f64 * objects as f64);
    Ok(Way {
        objects_per_call: None,
        calls: passes * calls as u64,
        us_per_object: (per_object_us * 1000.0).round() / 1000.0,
    })
}
