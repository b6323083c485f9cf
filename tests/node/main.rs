//! The scenarios on a real node: containerd, kubelet and kube-proxy 1.20.2 in a network
//! namespace behind edgegate, the cloud (etcd, kube-apiserver, kube-controller-manager)
//! across a veth that the tests cut.
//!
//! Every scenario (but those of `LAN_ONLY`) runs twice: on a node over a LAN link (a veth),
//! then on a node over a WAN (150 ms RTT, 1 % loss, 5 Mbit/s: `edgegate_testkit::wan`); a
//! trial's name starts with its link's, `lan::` or `wan::`. One node serves each link's run
//! and the tests run one at a time, in order: each leaves the node as the next expects (the
//! link is cut by `outage::*` and restored by
//! `outage::a_pod_deleted_in_the_cloud_stops_after_reconnect`; `exec::*`, before them, cuts
//! and restores it itself and deletes its own pod), and each makes sure of the
//! state it needs; the last five cut and restore the link themselves (`failing::*` runs a
//! pod of its own, deleted at its end), `reboot::a_node_powered_off…` powers the whole node off and on, `flapping::*` cuts and
//! restores it over and over while the gateway caches four more components (it comes after
//! the power-off, whose collection would take their caches for lost), and the last one
//! hands edgegate to kubelet as a static pod, which the node keeps to its end. Run with
//! `cargo test -p edgegate --test node [FILTER]` (`wan::` for the WAN's alone).
#![allow(clippy::disallowed_methods)]

mod exec;
mod failing;
mod flapping;
mod join;
mod outage;
mod reboot;
mod reconnect;
mod static_pod;
mod support;
mod topology;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use edgegate_testkit::Testbed;
use edgegate_testkit::netns::LinkKind;
use edgegate_testkit::wan::Wan;
use libtest_mimic::{Arguments, Failed, Trial};

type Test = fn(&mut Testbed) -> anyhow::Result<()>;

const TESTS: &[(&str, Test)] = &[
    (
        "join::the_node_joins_through_edgegate_and_runs_pods",
        join::the_node_joins_through_edgegate_and_runs_pods,
    ),
    (
        "exec::kubectl_exec_attach_port_forward_and_logs_reach_kubelet_through_edgegate",
        exec::kubectl_exec_attach_port_forward_and_logs_reach_kubelet_through_edgegate,
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
        "topology::the_other_filters_reach_kubelet_and_kube_proxy",
        topology::the_other_filters_reach_kubelet_and_kube_proxy,
    ),
    (
        "failing::a_pod_failing_offline_is_dropped_from_its_service",
        failing::a_pod_failing_offline_is_dropped_from_its_service,
    ),
    (
        "reconnect::what_changed_during_a_cut_reaches_the_node",
        reconnect::what_changed_during_a_cut_reaches_the_node,
    ),
    (
        "reboot::a_node_powered_off_longer_than_gc_after_boots_on_its_cache",
        reboot::a_node_powered_off_longer_than_gc_after_boots_on_its_cache,
    ),
    (
        "flapping::the_node_rides_a_flapping_link",
        flapping::the_node_rides_a_flapping_link,
    ),
    (
        "static_pod::edgegate_runs_as_a_static_pod_and_pods_reach_the_api_through_it",
        static_pod::edgegate_runs_as_a_static_pod_and_pods_reach_the_api_through_it,
    ),
];

/// The scenarios run over the LAN alone. The flapping link's: what it shows is the
/// gateway's own going online and offline over and over, which the LAN's veth shows
/// exactly (each 2 s window a window); over the WAN it would take as long again, and
/// has not been run there yet.
const LAN_ONLY: &[&str] = &["flapping::the_node_rides_a_flapping_link"];

/// The links the scenarios run over, in order, each named as its trials' prefix.
fn links() -> Vec<(&'static str, LinkKind)> {
    vec![
        ("lan", LinkKind::Lan),
        ("wan", LinkKind::Wan(Wan::default())),
    ]
}

/// The node of the link whose trials run now: started by its first trial, dropped (the whole
/// node and its cloud) before the next link's node starts, as one node at a time may run.
struct Bed {
    link: Option<&'static str>,
    testbed: Result<Testbed, String>,
}

impl Bed {
    /// The node over `link`, started (or its failure to start kept) on the first call.
    fn on(&mut self, link: &'static str, kind: &LinkKind) -> Result<&mut Testbed, Failed> {
        if self.link != Some(link) {
            self.testbed = Err("not started".to_owned());
            self.link = Some(link);
            self.testbed = support::start(kind).map_err(|e| format!("{e:#}"));
        }
        self.testbed
            .as_mut()
            .map_err(|e| Failed::from(format!("the node did not start: {e}")))
    }
}

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // One node, one test at a time: each changes what the next sees. With one thread,
    // libtest-mimic runs the trials on the main thread, which lives for the whole run: the
    // node's child processes die with the thread that spawned them.
    args.test_threads = Some(1);
    let bed = Arc::new(Mutex::new(Bed {
        link: None,
        testbed: Err("not started".to_owned()),
    }));
    let trials = links()
        .into_iter()
        .flat_map(|(link, kind)| {
            let bed = bed.clone();
            TESTS
                .iter()
                .filter(move |(name, _)| link == "lan" || !LAN_ONLY.contains(name))
                .map(move |&(name, test)| {
                    let (bed, kind) = (bed.clone(), kind.clone());
                    Trial::test(format!("{link}::{name}"), move || {
                        let mut guard = bed.lock().unwrap_or_else(|p| p.into_inner());
                        test(guard.on(link, &kind)?).map_err(|e| Failed::from(format!("{e:#}")))
                    })
                })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(wan) = bed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .testbed
        .as_ref()
        .ok()
        .and_then(|t| t.link.wan())
    {
        // What the WAN did to the last node's packets: the loss was real.
        println!("the WAN's packets: {:?}", wan.stats());
    }
    drop(bed);
    conclusion.exit_code()
}
