//! `cargo dev --node --boot-trials N [edgegate flags]`: on the node test bed, a Service
//! backed by a pod on the CNI bridge; N times: cut the link, power the node off, boot it
//! still cut (the pod's new sandbox takes a new address), and time (a) from the pod running
//! again to its ClusterIP answering from the node, then, with the link restored, (b) from
//! the link's return to the cloud having the pod's new address. Prints each trial, then
//! p50 (nearest rank) and max.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use edgegate_testkit::process::wait_until;
use edgegate_testkit::scenario::{wait_pod_containers, wait_programs, wait_readyz};
use edgegate_testkit::{Testbed, Toolchain, served};

use crate::trials::p50_max;

/// How long the node stays off: its processes are gone, its disk kept.
const OFF: Duration = Duration::from_secs(2);

/// Runs `N` offline boots (the first of `args`; the rest go to edgegate) and prints the
/// figures.
pub fn run(args: Vec<String>) -> Result<ExitCode> {
    let mut args = args.into_iter();
    let n: usize = args
        .next()
        .context("--boot-trials needs a number")?
        .parse()
        .context("--boot-trials needs a number")?;
    let tools = Toolchain::provision()?;
    let gateway = crate::node::gateway_command(args.collect())?;
    eprintln!("edgegate-dev: starting the cloud and the node (about a minute)…");
    let mut testbed = Testbed::start(&tools, gateway)?;
    testbed
        .cloud
        .cluster
        .apply(&served::backend_pod().to_string())?;
    let cluster_ip = served::create(&testbed)?;
    wait_pod_containers(&testbed, &[served::BACKEND])?;
    served::wait_answers(&testbed, &cluster_ip, Duration::from_secs(90))?;

    let (mut answered, mut learned) = (Vec::new(), Vec::new());
    for trial in 1..=n {
        let (to_answer, to_learn) = boot(&mut testbed, &cluster_ip)?;
        println!(
            "trial {trial}: pod running again → ClusterIP answers {to_answer:.2?}; link restored → the cloud has its new address {to_learn:.1?}"
        );
        answered.push(to_answer);
        learned.push(to_learn);
    }
    for (what, times) in [
        (
            "offline boot: pod running again → ClusterIP answers",
            &mut answered,
        ),
        (
            "link restored → the cloud has the new address",
            &mut learned,
        ),
    ] {
        let (p50, max) = p50_max(times);
        println!("{what}: p50 {p50:.2?}, max {max:.2?} ({n} trials)");
    }
    drop(testbed);
    Ok(ExitCode::SUCCESS)
}

/// One offline boot and reconnect: the two times.
fn boot(testbed: &mut Testbed, cluster_ip: &str) -> Result<(Duration, Duration)> {
    let old = served::cloud_address(testbed)?;
    testbed.link.cut()?;
    wait_readyz(testbed, true)?;
    testbed.node.power_off()?;
    // Not an assertion on time: the node stays off a little while. No runtime here: this
    // thread drives the test bed.
    #[allow(clippy::disallowed_methods)]
    std::thread::sleep(OFF);
    testbed.node.power_on()?;
    wait_readyz(testbed, true)?;
    wait_pod_containers(testbed, &[served::BACKEND])?;
    let running = Instant::now();
    let new = served::new_address(testbed, &old)?;
    wait_programs(testbed, served::SERVED, std::slice::from_ref(&new))?;
    served::wait_answers(testbed, cluster_ip, Duration::from_secs(90))?;
    let to_answer = running.elapsed();

    testbed.link.restore()?;
    let restored = Instant::now();
    wait_until(
        Duration::from_secs(180),
        "the cloud to have the pod's new address",
        || served::cloud_address(testbed).is_ok_and(|ip| ip == new),
    )?;
    let to_learn = restored.elapsed();
    wait_readyz(testbed, false)?;
    Ok((to_answer, to_learn))
}
