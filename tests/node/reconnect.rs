//! (f) Reconnect: what changed in the cloud during a cut reaches the node — a Service's
//! endpoints moved, a ConfigMap a pod reads edited, an EndpointSlice deleted.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::Testbed;
use edgegate_testkit::process::wait_until;
use edgegate_testkit::scenario::{
    self, ensure_cut, programs, restore_and_time, service, slice, wait_programs,
};
use edgegate_testkit::testbed::NODE;

use crate::support::{apply, pod_status, wait_pods_running};

/// The Service whose hand-made endpoints move during the cut.
const MOVING: &str = "moving";

/// Its endpoints before the cut, one in each of its two slices.
const BEFORE_A: &str = "198.19.127.10";
/// See [`BEFORE_A`].
const BEFORE_B: &str = "198.19.127.11";
/// Its only endpoint after the cut.
const AFTER: &str = "198.19.127.12";

/// The pod that reads the ConfigMap `settings` from a volume.
const READER: &str = "reader";

/// A host-network pod with the ConfigMap `settings` mounted at `/etc/settings`.
fn reader() -> String {
    let mut pod = scenario::pod(READER, true);
    pod["spec"]["volumes"] =
        serde_json::json!([{"name": "settings", "configMap": {"name": "settings"}}]);
    pod["spec"]["containers"][0]["volumeMounts"] =
        serde_json::json!([{"name": "settings", "mountPath": "/etc/settings"}]);
    pod.to_string()
}

/// The ConfigMap `settings`.
fn settings(greeting: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "default"},
        "data": {"greeting": greeting},
    })
    .to_string()
}

/// The gateway's answer for the EndpointSlice `name` in the node's cache: the multiplexer's
/// shared set (component `edgegate`), which kube-proxy is answered from.
fn cached_slice(testbed: &Testbed, name: &str) -> Result<u16> {
    let path = format!(
        "/v1/cache/object?component=edgegate&resource=endpointslices.v1beta1.discovery.k8s.io&name=default/{name}"
    );
    Ok(testbed.node.hub(&path)?.0)
}

/// With the link up: the Service `moving` has two hand-made slices (one endpoint each),
/// and a pod reads the ConfigMap `settings` from a volume. Cut: one slice moves to a third
/// address, the other is deleted, the ConfigMap is edited; the node keeps what it had.
/// Restored: kube-proxy's rules carry the moved endpoint alone, the new content is in the
/// pod's volume, and the deleted slice is gone from the node's cache; the times from the
/// link's return are printed. Leaves the link up.
pub fn what_changed_during_a_cut_reaches_the_node(testbed: &mut Testbed) -> Result<()> {
    if testbed.link.is_cut() {
        testbed.link.restore()?;
    }
    apply(testbed, &service(MOVING, false))?;
    apply(testbed, &slice(MOVING, "moving-a", &[(BEFORE_A, NODE)]))?;
    apply(testbed, &slice(MOVING, "moving-b", &[(BEFORE_B, NODE)]))?;
    apply(testbed, &settings("hello"))?;
    apply(testbed, &reader())?;
    let before = [BEFORE_A.to_owned(), BEFORE_B.to_owned()];
    wait_programs(testbed, MOVING, &before)?;
    wait_pods_running(testbed, &[READER])?;
    let uid = pod_status(testbed, READER)?["metadata"]["uid"]
        .as_str()
        .context("the reader pod has no uid")?
        .to_owned();
    let file: PathBuf = testbed.node.dir.join(format!(
        "kubelet/pods/{uid}/volumes/kubernetes.io~configmap/settings/greeting"
    ));
    let reads = |greeting: &str| std::fs::read_to_string(&file).is_ok_and(|s| s == greeting);
    wait_until(
        Duration::from_secs(60),
        "the ConfigMap in the pod's volume",
        || reads("hello"),
    )?;
    wait_until(
        Duration::from_secs(60),
        "the node's cache to hold both slices",
        || cached_slice(testbed, "moving-b").is_ok_and(|status| status == 200),
    )?;

    ensure_cut(testbed)?;
    apply(testbed, &slice(MOVING, "moving-a", &[(AFTER, NODE)]))?;
    testbed
        .cloud
        .kubectl(&["delete", "endpointslice", "moving-b", "-n", "default"])?;
    apply(testbed, &settings("bye"))?;
    ensure!(
        programs(testbed, MOVING, &before) && reads("hello"),
        "the node saw the cloud's changes while cut"
    );

    let after = [AFTER.to_owned()];
    let times = restore_and_time(
        testbed,
        &mut [
            (
                "kube-proxy's rules to carry the moved endpoints",
                &mut |t: &Testbed| programs(t, MOVING, &after),
            ),
            (
                "the edited ConfigMap in the pod's volume",
                &mut |_: &Testbed| reads("bye"),
            ),
            (
                "the deleted slice to leave the node's cache",
                &mut |t: &Testbed| cached_slice(t, "moving-b").is_ok_and(|status| status == 404),
            ),
        ],
    )?;
    println!(
        "link restored → kube-proxy's rules updated for moved endpoints: {:.1?}",
        times[0]
    );
    println!(
        "link restored → edited ConfigMap in the pod's volume: {:.1?}",
        times[1]
    );
    println!(
        "link restored → deleted EndpointSlice gone from the cache: {:.1?}",
        times[2]
    );
    Ok(())
}
