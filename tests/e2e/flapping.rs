//! A flapping edge link: the link to the cloud goes down and up, every 2 s and then at random
//! intervals, while 200 kube-rs reflectors of two kinds and four components watch through
//! the gateway and the cloud churns (`edgegate_testkit::flapping`, shared with the node's).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::ADMIN_TOKEN;
use edgegate_testkit::flapping::{
    AGENTS, Reflectors, SETTLED_WITHIN, Usage, cloud, flap, flapping_for,
};

use crate::support::{Env, namespace, runtime};

const REFLECTORS: usize = 200;

/// 200 reflectors (ConfigMaps and Services of one namespace, as four cached components)
/// watch through a gateway whose link to the cloud is cut and restored every 2 s, then at
/// random intervals, for 40 s while the cloud changes 20 objects a second. Afterwards every
/// reflector's store equals the cloud's, object by object and resourceVersion by
/// resourceVersion; no reflector saw an object's resourceVersion go backwards; the gateway's
/// file descriptors, threads, RSS and tasks come back to what they were before the flapping, within
/// a margin.
pub fn reflectors_converge_after_a_flapping_link(env: &Env) -> Result<()> {
    flapping_link(env, &[], Some(ADMIN_TOKEN))
}

/// [`reflectors_converge_after_a_flapping_link`] with the Services served by the
/// multiplexer (`--pool-scope-resources=/v1/services`), the reflectors on the gateway's
/// identity (a caller with its own credentials goes to the apiserver).
pub fn reflectors_converge_after_a_flapping_link_through_the_multiplexer(env: &Env) -> Result<()> {
    flapping_link(env, &["--pool-scope-resources=/v1/services"], None)
}

/// The flapping link, the gateway started with `flags`, the reflectors with `token`.
fn flapping_link(env: &Env, flags: &[&str], token: Option<&str>) -> Result<()> {
    let ns = namespace(&env.cluster, "flap")?;
    let admin = env.gateway(&[])?;
    let relay = edgegate_testkit::Relay::start(([127, 0, 0, 1], env.cluster.port).into())?;
    let agents = format!("--cache-agents={}", AGENTS.join(","));
    let mut gateway = edgegate_testkit::Gateway::start_to(
        &env.bin,
        &env.cluster,
        &relay.url(),
        &[&["--heartbeat-interval-seconds=1", &agents], flags].concat(),
    )?;
    let rt = runtime();
    let client = cloud::plain();
    rt.block_on(cloud::seed(&client, &admin.url(), &ns))?;

    let reflectors = Reflectors::spawn(&rt, &gateway.url(), token, &ns, REFLECTORS)?;
    reflectors.wait_listed(Duration::from_secs(60))?;
    std::thread::sleep(Duration::from_secs(2));
    let pid = gateway.process().context("the gateway runs")?.pid();
    let hub = gateway.hub;
    let metrics = || Ok(edgegate_testkit::http::get(hub, "/metrics")?.body);
    let before = Usage::of(pid, &metrics)?;

    let stop = Arc::new(AtomicBool::new(false));
    let churn = rt.spawn(cloud::churn(
        client.clone(),
        admin.url(),
        ns.clone(),
        stop.clone(),
    ));
    let flapping = flapping_for(40);
    let cuts = flap(flapping, |up| {
        if up {
            relay.restore();
        } else {
            relay.cut();
        }
        Ok(())
    })?;
    stop.store(true, Ordering::SeqCst);
    let changes = rt.block_on(churn)??;

    let truth = rt.block_on(cloud::truth(&client, &admin.url(), &ns))?;
    let convergence = reflectors
        .converge(&truth, Duration::from_secs(180))
        .map_err(|error| {
            let sets = edgegate_testkit::http::get(gateway.hub, "/v1/cache")
                .map(|r| r.body)
                .unwrap_or_default();
            error.context(format!("the gateway's sets: {sets}"))
        })?;
    let backwards = reflectors.backwards();
    ensure!(
        backwards.is_empty(),
        "{} object(s) seen going back in resourceVersion, e.g. {:?}",
        backwards.len(),
        &backwards[..backwards.len().min(5)]
    );
    // Measured with the reflectors still watching, as before the flapping.
    let (after, settling) = Usage::settle(pid, &metrics, &before, SETTLED_WITHIN)?;
    let relists = reflectors.relists();
    println!(
        "{cuts} cuts in {flapping:?}, {changes} changes in the cloud, {REFLECTORS} reflectors ({relists} lists): every store equal to the cloud {convergence:?} after the last restore, no resourceVersion backwards; gateway before → after: {before} → {after} ({settling:.1?} later; descriptors by kind: {})",
        after.kinds_changed_from(&before).join(", ")
    );
    if flags
        .iter()
        .any(|f| f.starts_with("--pool-scope-resources="))
    {
        // The Services' reflectors were answered there, not by the apiserver.
        let metrics = edgegate_testkit::http::get(gateway.hub, "/metrics")?.body;
        let answers: f64 = metrics
            .lines()
            .filter(|l| l.starts_with("edgegate_multiplexer_answers"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        ensure!(
            answers >= (REFLECTORS / 4) as f64,
            "the multiplexer answered {answers} lists and watches"
        );
        println!("the multiplexer answered {answers} lists and watches");
    }
    gateway.stop(Duration::from_secs(5));
    Ok(())
}
