//! The scenarios on a real node: containerd, kubelet and kube-proxy 1.20.2 in a network
//! namespace behind edgegate, the cloud (etcd, kube-apiserver, kube-controller-manager)
//! across a veth that the tests cut.
//!
//! One node serves the whole run and the tests run one at a time, in order: each leaves
//! the node as the next expects (the link is cut by `outage::*` and restored by
//! `outage::a_pod_deleted_in_the_cloud_stops_after_reconnect`), and each makes sure of
//! the state it needs; the last two cut and restore the link themselves, and the last one
//! powers the whole node off and on. Run with `cargo test -p edgegate --test node [FILTER]`.
#![allow(clippy::disallowed_methods)]

mod join;
mod outage;
mod reboot;
mod reconnect;
mod support;
mod topology;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use edgegate_testkit::Testbed;
use libtest_mimic::{Arguments, Failed, Trial};

type Test = fn(&mut Testbed) -> anyhow::Result<()>;

const TESTS: &[(&str, Test)] = &[
    (
        "join::the_node_joins_through_edgegate_and_runs_pods",
        join::the_node_joins_through_edgegate_and_runs_pods,
    ),
    (
        "outage::a_cut_link_keeps_the_node_running",
        outage::a_cut_link_keeps_the_node_running,
    ),
    (
        "outage::restarts_while_cut_keep_the_pods_and_rules",
        outage::restarts_while_cut_keep_the_pods_and_rules,
    ),
    (
        "reboot::an_edgegate_killed_while_cut_serves_the_node_again",
        reboot::an_edgegate_killed_while_cut_serves_the_node_again,
    ),
    (
        "outage::a_pod_deleted_in_the_cloud_stops_after_reconnect",
        outage::a_pod_deleted_in_the_cloud_stops_after_reconnect,
    ),
    (
        "topology::kube_proxy_and_pods_see_the_filtered_cloud",
        topology::kube_proxy_and_pods_see_the_filtered_cloud,
    ),
    (
        "reconnect::what_changed_during_a_cut_reaches_the_node",
        reconnect::what_changed_during_a_cut_reaches_the_node,
    ),
    (
        "reboot::a_node_powered_off_longer_than_gc_after_boots_on_its_cache",
        reboot::a_node_powered_off_longer_than_gc_after_boots_on_its_cache,
    ),
];

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // One node, one test at a time: each changes what the next sees.
    args.test_threads = Some(1);
    // Started here, on the main thread: child processes die with the thread that spawned
    // them, and this one lives for the whole run. Listing needs no node.
    let testbed: Arc<Mutex<Result<Testbed, String>>> = Arc::new(Mutex::new(if args.list {
        Err("not started for --list".to_owned())
    } else {
        support::start().map_err(|e| format!("{e:#}"))
    }));
    let trials = TESTS
        .iter()
        .map(|&(name, test)| {
            let testbed = testbed.clone();
            Trial::test(name, move || {
                let mut guard = testbed.lock().unwrap_or_else(|p| p.into_inner());
                let testbed = guard
                    .as_mut()
                    .map_err(|e| Failed::from(format!("the node did not start: {e}")))?;
                test(testbed).map_err(|e| Failed::from(format!("{e:#}")))
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    drop(testbed);
    conclusion.exit_code()
}
