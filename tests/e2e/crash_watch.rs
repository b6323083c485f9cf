//! Crash safety of watch-event writes: kill -9 the gateway at random moments while a cached
//! watch brings it a fast stream of creations, updates and deletions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use edgegate::cache::{RedbStore, ResourceKey, SetKey, Store};
use http_body_util::BodyExt;

use crate::crash::{Bed, random_below};
use crate::support::{Env, Plain, Watch, client, list_as, request, runtime, versions};

const ROUNDS: usize = 20;
const SEEDED: usize = 200;
/// The namespace's name's start and the seeded ConfigMaps' (`<SEED>-<i>`).
const SEED: &str = "crash-watch";
/// Clients creating, updating and deleting ConfigMaps at once.
const WRITERS: usize = 4;
/// The kill lands this long at most after the churn starts: past the writer's 1 s flush, so
/// that some kills find events durable and some do not.
const WINDOW: Duration = Duration::from_secs(3);
const WATCHER: &str = "e2e-watcher/v1";

/// kill -9 the gateway at random moments while a client watches ConfigMaps through it and
/// the cloud creates, updates and deletes them fast, 20 times: afterwards the store opens,
/// the set is synced to some event's resourceVersion (or still its list's), and holds
/// exactly the objects the list and the events up to that one make: never a version
/// advanced over a hole, never less than the committed list. The restarted gateway serves.
pub fn kill_nine_during_watch_events_leaves_a_prefix_of_them(env: &Env) -> Result<()> {
    let rt = runtime();
    let client = client();
    let Bed {
        ns,
        admin: _admin,
        mut victim,
        direct,
        cached,
    } = Bed::seeded(env, &rt, &client, SEED, "e2e-watcher", SEEDED)?;

    let mut kept = Vec::new();
    let mut slowest_restart = Duration::ZERO;
    for round in 0..ROUNDS {
        // The restarted gateway serves, and the list it caches is the "old" state.
        let (listed_at, items) = rt.block_on(list_as(&client, &cached, WATCHER))?;
        crate::support::wait_sets(victim.hub, "e2e-watcher", 1)?;
        let listed: BTreeMap<String, u64> = versions(&items)
            .into_iter()
            .map(|(name, at)| (name, rv_of(&at)))
            .collect();
        let watch = |base: &str| format!("{base}?watch=true&resourceVersion={listed_at}");
        let mut truth = rt.block_on(Watch::open(&client, &watch(&direct), "e2e/v1"))?;
        let mut through = rt.block_on(Watch::open(&client, &watch(&cached), WATCHER))?;
        let reader = rt.spawn(async move {
            while let Ok(Some(_)) = through.next(Duration::from_secs(60)).await {}
        });

        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (client, url, stop) = (client.clone(), direct.clone(), stop.clone());
                rt.spawn(async move { churn(&client, &url, &format!("r{round}w{w}"), &stop).await })
            })
            .collect();
        let delay = random_below(WINDOW);
        std::thread::sleep(delay);
        victim.kill();
        stop.store(true, Ordering::Relaxed);
        for writer in writers {
            rt.block_on(writer)??;
        }
        let _ = rt.block_on(reader);

        // Every event the cloud sent up to a last write of ours, in order.
        let last = rt.block_on(write(&client, &format!("{direct}/{SEED}-0"), Write::Patch))?;
        let mut events = Vec::new();
        loop {
            let event = rt
                .block_on(truth.next(Duration::from_secs(30)))?
                .context("the direct watch ended")?;
            let at = rv(&event["object"]);
            events.push(event);
            if at >= last {
                break;
            }
        }

        let (synced, stale, held) = read_set(&victim, &ns)?;
        let applied = events
            .iter()
            .take_while(|event| rv(&event["object"]) <= synced)
            .count();
        ensure!(
            synced >= rv_of(&listed_at),
            "round {round} (killed after {delay:?}): the set is at {synced}, before its committed list ({listed_at})"
        );
        let expected = replay(listed, &events[..applied]);
        ensure!(
            held == expected,
            "round {round} (killed after {delay:?}): the set says {synced} (stale: {stale}) but holds {} objects that are not the list and the {applied} events up to it ({} objects); differing: {:?}",
            held.len(),
            expected.len(),
            difference(&held, &expected)
        );
        kept.push((delay, applied, events.len()));
        let restarted = Instant::now();
        victim.restart()?;
        slowest_restart = slowest_restart.max(restarted.elapsed());
    }
    let report: Vec<String> = kept
        .iter()
        .map(|(delay, applied, sent)| format!("{delay:.2?}: {applied}/{sent}"))
        .collect();
    println!(
        "{ROUNDS} kills within {WINDOW:?} of churn by {WRITERS} writers (kill moment: events the store kept / events sent): {}; the restarted gateway answered within {slowest_restart:.2?} (polled every 100 ms)",
        report.join(", ")
    );
    let (none, some) = (
        kept.iter().filter(|(_, applied, _)| *applied == 0).count(),
        kept.iter().filter(|(_, applied, _)| *applied > 0).count(),
    );
    ensure!(
        none > 0 && some > 0,
        "the kills must land both before and after durable event writes to show anything ({none} kept none, {some} kept some)"
    );
    Ok(())
}

/// What one writer of the churn does, in turn.
enum Write {
    Create,
    Patch,
    Delete,
}

/// Creates, updates and deletes ConfigMaps named `{prefix}-{i}`, and updates seeded ones,
/// until `stop`.
async fn churn(client: &Plain, url: &str, prefix: &str, stop: &AtomicBool) -> Result<()> {
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let name = |n: usize| format!("{url}/{prefix}-{n}");
        write(client, &format!("{url}#{prefix}-{i}"), Write::Create).await?;
        if i >= 1 {
            write(client, &name(i - 1), Write::Patch).await?;
        }
        if i >= 2 {
            write(client, &name(i - 2), Write::Delete).await?;
        }
        let seeded = format!("{url}/{SEED}-{}", fastrand::usize(1..SEEDED));
        write(client, &seeded, Write::Patch).await?;
        i += 1;
    }
    Ok(())
}

/// One write as admin, directly to the cloud; returns the resourceVersion it made. A create
/// takes `{collection}#{name}`.
async fn write(client: &Plain, target: &str, kind: Write) -> Result<u64> {
    let (method, url, body, content_type) = match kind {
        Write::Create => {
            let (collection, name) = target.split_once('#').context("collection#name")?;
            let body = format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"v":"0"}}}}"#
            );
            (::http::Method::POST, collection, body, "application/json")
        }
        Write::Patch => (
            ::http::Method::PATCH,
            target,
            format!(r#"{{"data":{{"v":"{}"}}}}"#, fastrand::u32(..)),
            "application/merge-patch+json",
        ),
        Write::Delete => (
            ::http::Method::DELETE,
            target,
            String::new(),
            "application/json",
        ),
    };
    let body = (!body.is_empty()).then_some(body.as_str());
    let mut req = request(
        method,
        url,
        Some(edgegate_testkit::ADMIN_TOKEN),
        "e2e/v1",
        body,
    )?;
    req.headers_mut().insert(
        "content-type",
        ::http::HeaderValue::from_static(content_type),
    );
    let response = client.request(req).await?;
    let status = response.status();
    let body: Bytes = response.into_body().collect().await?.to_bytes();
    ensure!(
        status.is_success(),
        "{target}: {status}: {}",
        String::from_utf8_lossy(&body)
    );
    let object: serde_json::Value = serde_json::from_slice(&body)?;
    Ok(rv(&object))
}

/// The resourceVersion of an object (0 when it has none).
fn rv(object: &serde_json::Value) -> u64 {
    rv_of(
        object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default(),
    )
}

fn rv_of(text: &str) -> u64 {
    text.parse().unwrap_or(0)
}

/// `name → resourceVersion` of `listed` after `events`.
fn replay(mut set: BTreeMap<String, u64>, events: &[serde_json::Value]) -> BTreeMap<String, u64> {
    for event in events {
        let name = event["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match event["type"].as_str() {
            Some("ADDED" | "MODIFIED") => {
                set.insert(name, rv(&event["object"]));
            }
            Some("DELETED") => {
                set.remove(&name);
            }
            _ => {}
        }
    }
    set
}

/// The entries of two sets that differ (a few).
fn difference(
    a: &BTreeMap<String, u64>,
    b: &BTreeMap<String, u64>,
) -> Vec<(String, Option<u64>, Option<u64>)> {
    a.keys()
        .chain(b.keys())
        .filter(|name| a.get(*name) != b.get(*name))
        .take(5)
        .map(|name| (name.clone(), a.get(name).copied(), b.get(name).copied()))
        .collect()
}

/// The watcher's set of ConfigMaps in `ns` in the (dead) gateway's store: its
/// resourceVersion, whether it is stale, and `name → resourceVersion` of what it holds.
fn read_set(
    gateway: &edgegate_testkit::Gateway,
    ns: &str,
) -> Result<(u64, bool, BTreeMap<String, u64>)> {
    let store = RedbStore::open(&gateway.dir.join("cache"))?;
    let resource = ResourceKey {
        component: "e2e-watcher".into(),
        resource: "configmaps".into(),
        version: "v1".into(),
        group: String::new(),
    };
    let sets = store.sets(&SetKey::resource_prefix(&resource))?;
    ensure!(sets.len() == 1, "one set of the watcher: {sets:?}");
    let meta = &sets[0].1;
    let mut held = BTreeMap::new();
    for entry in store.scan(&resource.namespace_prefix(ns))? {
        let (_, object) = entry?;
        let object: serde_json::Value = serde_json::from_slice(&object)?;
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        held.insert(name.to_owned(), rv(&object));
    }
    Ok((rv_of(&meta.resource_version), meta.stale, held))
}
