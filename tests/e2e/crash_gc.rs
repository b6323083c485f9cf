//! Crash safety of garbage collection: kill -9 the gateway at random moments of its start,
//! when it collects the caches of components unused for `--cache-gc-after`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate::cache::{RedbStore, ResourceKey, SetKey, Store};

use crate::crash::random_below;
use crate::support::{
    Env, client, create_configmaps, list_as, metric, namespace, runtime, versions,
};

const ROUNDS: usize = 20;
const OBJECTS: usize = 2000;
/// Components cached apart, each collected in its own transaction.
const COMPONENTS: [&str; 4] = ["e2e-gc0", "e2e-gc1", "e2e-gc2", "e2e-gc3"];
const COLLECTED: &str = "edgegate_cache_collected_components_total";

/// kill -9 the gateway at random moments of its start while it collects four components'
/// caches of 2 000 ConfigMaps each, 20 times: afterwards the store opens, and each
/// component is either whole (its set and every object of it) or gone (no set, no object,
/// no last use); the restarted gateway collects what is left and serves.
pub fn kill_nine_during_gc_removes_a_component_whole_or_not_at_all(env: &Env) -> Result<()> {
    let ns = namespace(&env.cluster, "crash-gc")?;
    let admin = env.gateway(&[])?;
    let agents = format!("--cache-agents={}", COMPONENTS.join(","));
    let mut victim = env.gateway(&[&agents, "--cache-gc-after=2s"])?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &admin.url(), &ns, "gc", OBJECTS))?;
    let cached = format!("{}/api/v1/namespaces/{ns}/configmaps", victim.url());

    // Each round: the components list (the restarted gateway serves), then are left unused
    // for longer than --cache-gc-after of running time, so that the next start collects them.
    let cache_all = |victim: &mut edgegate_testkit::Gateway| -> Result<BTreeMap<String, String>> {
        let mut truth = None;
        for component in COMPONENTS {
            let (_, items) = rt.block_on(list_as(&client, &cached, &format!("{component}/v1")))?;
            truth.get_or_insert_with(|| versions(&items));
        }
        for component in COMPONENTS {
            crate::support::wait_sets(victim.hub, component, 1)?;
        }
        std::thread::sleep(Duration::from_secs(4));
        victim.stop(Duration::from_secs(10));
        truth.context("some component listed")
    };

    // How long a start takes to collect them all, to kill within.
    let mut truth = cache_all(&mut victim)?;
    let started = Instant::now();
    victim.spawn()?;
    // Polled closely: the collection itself takes milliseconds.
    while !metric(victim.hub, COLLECTED).is_ok_and(|n| n >= 4.0) {
        ensure!(
            started.elapsed() < Duration::from_secs(30),
            "a start collects the unused components"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let collect_time = started.elapsed();
    victim.stop(Duration::from_secs(10));
    ensure!(
        held(&victim, &ns, &truth)?.values().all(|whole| !whole),
        "a start collects every unused component"
    );
    victim.restart()?;

    let window = collect_time.saturating_mul(3) / 2;
    let mut kills = Vec::new();
    let mut slowest_restart = Duration::ZERO;
    for round in 0..ROUNDS {
        truth = cache_all(&mut victim)?;
        let before = held(&victim, &ns, &truth)?;
        ensure!(
            before.values().all(|whole| *whole),
            "round {round}: every component is cached before the start that collects them"
        );
        let delay = random_below(window);
        victim.spawn()?;
        std::thread::sleep(delay);
        victim.kill();
        let after = held(&victim, &ns, &truth)
            .with_context(|| format!("round {round}, killed after {delay:?}"))?;
        let left = after.values().filter(|whole| **whole).count();
        kills.push((delay, COMPONENTS.len() - left));

        // The restarted gateway collects the rest and serves.
        let restarted = Instant::now();
        victim.restart()?;
        slowest_restart = slowest_restart.max(restarted.elapsed());
        let removed = COMPONENTS.len() - left;
        let collected = || metric(victim.hub, COLLECTED).is_ok_and(|n| n >= left as f64);
        edgegate_testkit::process::wait_until(Duration::from_secs(30), COLLECTED, collected)
            .with_context(|| {
                format!("round {round}: {removed} collected before the kill, {left} left")
            })?;
    }
    let report: Vec<String> = kills
        .iter()
        .map(|(delay, removed)| format!("{delay:.0?}: {removed}"))
        .collect();
    println!(
        "{ROUNDS} kills within {window:?} of a start that collects {} components of {OBJECTS} objects (one takes {collect_time:?}; kill moment: components collected): {}; the restarted gateway answered within {slowest_restart:.2?} (polled every 100 ms)",
        COMPONENTS.len(),
        report.join(", ")
    );
    ensure!(
        kills.iter().any(|(_, removed)| *removed < COMPONENTS.len())
            && kills.iter().any(|(_, removed)| *removed > 0),
        "the kills must land both before and after collections to show anything"
    );
    Ok(())
}

/// Whether each component is cached whole in the (stopped) gateway's store: its set, every
/// object of `truth` as it is there, and its last use. Fails when one is neither whole nor
/// gone (no set, no object, no last use).
fn held(
    gateway: &edgegate_testkit::Gateway,
    ns: &str,
    truth: &BTreeMap<String, String>,
) -> Result<BTreeMap<&'static str, bool>> {
    let store = RedbStore::open(&gateway.dir.join("cache"))?;
    let used: BTreeMap<String, u64> = store.components()?.into_iter().collect();
    let mut whole = BTreeMap::new();
    for component in COMPONENTS {
        let resource = ResourceKey {
            component: component.into(),
            resource: "configmaps".into(),
            version: "v1".into(),
            group: String::new(),
        };
        let sets = store.sets(&SetKey::resource_prefix(&resource))?.len();
        let mut objects = BTreeMap::new();
        for entry in store.scan(&resource.namespace_prefix(ns))? {
            let (_, object) = entry?;
            let object: serde_json::Value = serde_json::from_slice(&object)?;
            let field = |name: &str| {
                object["metadata"][name]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            };
            objects.insert(field("name"), field("resourceVersion"));
        }
        let last_use = used.contains_key(component);
        if sets == 1 && last_use && objects == *truth {
            whole.insert(component, true);
        } else {
            ensure!(
                sets == 0 && !last_use && objects.is_empty(),
                "{component} is neither whole nor gone: {sets} sets, {} of {} objects, last use recorded: {last_use}",
                objects.len(),
                truth.len()
            );
            whole.insert(component, false);
        }
    }
    Ok(whole)
}
