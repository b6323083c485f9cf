//! A pod whose container keeps failing while the link is cut: kubelet reports it not ready
//! through edgegate, its endpoint follows, and kube-proxy stops sending its Service there.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::Testbed;
use edgegate_testkit::process::wait_until;
use edgegate_testkit::scenario::{ensure_cut, pod, wait_programs};

use crate::support::{apply, cache_endpoints_as_coredns, pod_status, pod_tasks, wait_pods_running};
use edgegate_testkit::served::{
    COREDNS, KUBE_PROXY, KUBELET, backend_addresses_of, endpoints_addresses_of, endpoints_path,
    read_through_gateway, selecting,
};

/// The pod, and the app its Service selects.
const FAILING: &str = "failing";

/// Its Service.
const SERVICE: &str = "failing-web";

/// The pod on the CNI bridge: busybox's httpd on port 80, unless `fail` is in the host
/// directory it mounts, which makes every start of its container exit at once.
fn failing_pod(flags: &std::path::Path) -> String {
    let mut pod = pod(FAILING, false);
    pod["spec"]["containers"][0]["command"] = serde_json::json!([
        "/bin/sh",
        "-c",
        "if [ -e /flags/fail ]; then exit 1; fi; exec /bin/httpd -f -p 80 -h /"
    ]);
    pod["spec"]["containers"][0]["volumeMounts"] =
        serde_json::json!([{"name": "flags", "mountPath": "/flags"}]);
    pod["spec"]["volumes"] = serde_json::json!([{
        "name": "flags",
        "hostPath": {"path": flags.display().to_string(), "type": "Directory"},
    }]);
    pod.to_string()
}

/// Online, kube-proxy sends the Service to the pod. Cut, the pod's container is killed and
/// fails at every start: the pod read through edgegate is not ready, so is its endpoint in
/// the Service's EndpointSlices (kube-proxy's) and Endpoints (CoreDNS's), and kube-proxy
/// drops it from the Service. Then the link is
/// restored and the pod and its Service are deleted. Leaves the link up.
pub fn a_pod_failing_offline_is_dropped_from_its_service(testbed: &mut Testbed) -> Result<()> {
    if testbed.link.is_cut() {
        testbed.link.restore()?;
    }
    let flags = testbed.node.dir.join("failing-flags");
    std::fs::create_dir_all(&flags)?;
    let _ = std::fs::remove_file(flags.join("fail"));
    apply(testbed, &failing_pod(&flags))?;
    apply(testbed, &selecting(SERVICE, FAILING))?;
    let ids = wait_pods_running(testbed, &[FAILING])?;
    let ip = pod_status(testbed, FAILING)?["status"]["podIP"]
        .as_str()
        .context("the failing pod has no IP")?
        .to_owned();
    wait_programs(testbed, SERVICE, std::slice::from_ref(&ip))?;
    cache_endpoints_as_coredns(testbed)?;

    ensure_cut(testbed)?;
    std::fs::write(flags.join("fail"), b"")?;
    let tasks = pod_tasks(testbed, &ids)?;
    let pid = tasks
        .values()
        .next()
        .context("the failing pod runs no container")?;
    testbed.node.run("kill", &["-9", &pid.to_string()])?;
    wait_programs(testbed, SERVICE, &[])?;
    let path = format!(
        "/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D{SERVICE}"
    );
    let slices = read_through_gateway(testbed, KUBE_PROXY, &path)?;
    ensure!(
        backend_addresses_of(&slices, FAILING) == [(ip.clone(), false)],
        "the Service's EndpointSlices read through edgegate: {:?}",
        backend_addresses_of(&slices, FAILING)
    );
    let endpoints = read_through_gateway(testbed, COREDNS, &endpoints_path(SERVICE))?;
    ensure!(
        endpoints_addresses_of(&endpoints, FAILING) == [(ip.clone(), false)],
        "the Service's Endpoints read through edgegate as CoreDNS: {:?}",
        endpoints_addresses_of(&endpoints, FAILING)
    );
    let pod = read_through_gateway(
        testbed,
        KUBELET,
        &format!("/api/v1/namespaces/default/pods/{FAILING}"),
    )?;
    let container = &pod["status"]["containerStatuses"][0];
    ensure!(
        container["ready"] == false && container["state"]["running"].is_null(),
        "kubelet wrote its container as running: {}",
        pod["status"]
    );

    testbed.link.restore()?;
    crate::support::wait_readyz(testbed, false)?;
    testbed
        .cloud
        .kubectl(&["delete", "service", SERVICE, "-n", "default", "--wait=true"])?;
    testbed.cloud.kubectl(&[
        "delete",
        "pod",
        FAILING,
        "-n",
        "default",
        "--grace-period=0",
        "--force",
    ])?;
    std::fs::remove_file(flags.join("fail"))?;
    wait_until(
        Duration::from_secs(90),
        "the failing pod to be gone",
        || pod_status(testbed, FAILING).is_err(),
    )?;
    Ok(())
}
