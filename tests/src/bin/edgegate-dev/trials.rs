//! `cargo dev --node --trials N [edgegate flags]`: on the node test bed, N times: cut the
//! link, delete a pod of the node and move a Service's endpoints in the cloud, restore the
//! link, and time (a) the pod's container stopped and (b) kube-proxy's rules carrying the
//! new endpoints, from the link's return, then checks that the deleted pod, once kubelet has
//! finished deleting it in the cloud, leaves kubelet's cache. Prints each trial, then p50 (nearest rank) and max, and how many trials' pods left
//! the cache.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use edgegate_testkit::scenario::{self, reconnect, wait_pod_containers, wait_programs};
use edgegate_testkit::testbed::NODE;
use edgegate_testkit::{Testbed, Toolchain};

/// The Service whose endpoints move in every trial.
const SERVICE: &str = "trials";

/// Its only EndpointSlice.
const SLICE: &str = "trials-by-hand";

/// Runs `N` trials (the first of `args`; the rest go to edgegate) and prints the figures.
pub fn run(args: Vec<String>) -> Result<ExitCode> {
    let mut args = args.into_iter();
    let n: usize = args
        .next()
        .context("--trials needs a number")?
        .parse()
        .context("--trials needs a number")?;
    let tools = Toolchain::provision()?;
    let gateway = crate::node::gateway_command(args.collect())?;
    eprintln!("edgegate-dev: starting the cloud and the node (about a minute)…");
    let mut testbed = Testbed::start(&tools, gateway)?;
    let cluster = &testbed.cloud.cluster;
    cluster.apply(&scenario::service(SERVICE, false))?;
    let mut at = endpoint(0);
    cluster.apply(&scenario::slice(SERVICE, SLICE, &[(&at, NODE)]))?;
    wait_programs(&testbed, SERVICE, &[at])?;

    let mut stopped = Vec::new();
    let mut updated = Vec::new();
    let mut left_cache = 0;
    for trial in 1..=n {
        let pod = format!("trial-{trial}");
        testbed
            .cloud
            .cluster
            .apply(&scenario::pod(&pod, true).to_string())?;
        wait_pod_containers(&testbed, &[&pod])?;
        at = endpoint(trial);
        let times = reconnect(&mut testbed, &pod, (SERVICE, SLICE), &at)?;
        println!(
            "trial {trial}: link restored → deleted pod stopped {:.1?}, → kube-proxy's rules updated {:.1?}",
            times.pod_stopped, times.rules_updated
        );
        stopped.push(times.pod_stopped);
        updated.push(times.rules_updated);
        match scenario::wait_gone_from_cache(&testbed, "default", &pod) {
            Ok(after) => {
                println!("trial {trial}: gone from the cloud → from kubelet's cache {after:.1?}");
                left_cache += 1;
            }
            Err(e) => println!("trial {trial}: {e:#}"),
        }
        scenario::wait_readyz(&testbed, false)?;
    }
    for (what, times) in [
        ("deleted pod stopped", &mut stopped),
        ("kube-proxy's rules updated", &mut updated),
    ] {
        let (p50, max) = p50_max(times);
        println!("link restored → {what}: p50 {p50:.1?}, max {max:.1?} ({n} trials)");
    }
    println!(
        "the deleted pod left kubelet's cache after it left the cloud in {left_cache} of {n} trials"
    );
    drop(testbed);
    Ok(if left_cache == n {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The endpoint a trial moves the Service to, in a range no node uses.
fn endpoint(trial: usize) -> String {
    format!("198.19.126.{}", 10 + trial % 200)
}

/// The median by nearest rank and the maximum.
pub fn p50_max(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    let rank = times.len().div_ceil(2).max(1);
    (
        times.get(rank - 1).copied().unwrap_or_default(),
        times.last().copied().unwrap_or_default(),
    )
}
