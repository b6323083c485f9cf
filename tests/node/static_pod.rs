//! (g) edgegate deployed as YurtHub is: its image (`deploy/build-image`) imported into
//! containerd, its manifest (`deploy/edgegate.yaml`) in kubelet's static pod directory, its
//! identity from a bootstrap kubeconfig; and a pod that uses in-cluster config reaching the
//! API through it at 169.254.2.1:10268, online and offline.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::Testbed;
use edgegate_testkit::bootstrap::{self, BootstrapToken};
use edgegate_testkit::deploy;
use edgegate_testkit::process::wait_until;
use edgegate_testkit::scenario::ensure_cut;
use edgegate_testkit::testbed::{FILTERS, NODE};

use crate::support::{apply, environ};

const IMAGE: &str = "localhost/edgegate:node-test";
const NAMESPACE: &str = "incluster";
const POD: &str = "reader";
/// The hub interface's address and the HTTPS proxy's port, as masterservice gives pods.
const HUB: &str = "169.254.2.1";

/// kubelet runs edgegate from the shipped manifest and image; the gateway gets its client
/// certificate with the bootstrap token, and its serving certificate once approved (as
/// yurt-manager does); the node is Ready through it; a pod's kubectl, with only its service
/// account's token and CA, lists the ConfigMaps its RBAC allows (and not the Secrets) at
/// `KUBERNETES_SERVICE_HOST`, online, with the link cut, and after it is back.
pub fn edgegate_runs_as_a_static_pod_and_pods_reach_the_api_through_it(
    testbed: &mut Testbed,
) -> Result<()> {
    if testbed.link.is_cut() {
        testbed.link.restore()?;
    }
    let dir = testbed.node.dir.clone();
    let archive = dir.join("edgegate.oci.tar");
    let filters = edgegate_testkit::filters::built(FILTERS)?;
    let built = deploy::build_image(
        Path::new(env!("CARGO_BIN_EXE_edgegate")),
        &filters,
        IMAGE,
        &archive,
    )?;
    eprintln!("{}", built.trim());
    testbed.node.containerd.import(&archive)?;

    let cluster = &testbed.cloud.cluster;
    let token = BootstrapToken::random("static");
    bootstrap::seed(cluster, &token)?;
    let hub_dir = dir.join("static-pod/var-lib-edgegate");
    let kubernetes_dir = dir.join("static-pod/etc-kubernetes");
    for d in [&hub_dir, &kubernetes_dir] {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(
        hub_dir.join("bootstrap-hub.conf"),
        deploy::bootstrap_kubeconfig(cluster, &cluster.url(), &token)?,
    )?;
    let manifest = deploy::fitted(
        &deploy::manifest()?,
        &[
            (
                "      image: localhost/edgegate:0.1.0",
                format!("      image: {IMAGE}"),
            ),
            (
                "        - --server-addr=https://kube-apiserver.invalid:6443",
                format!(
                    "        - --server-addr={}\n        - --cache-agents=kubectl\n        \
                     - --log-level=info,edgegate=debug",
                    cluster.url()
                ),
            ),
            (
                "        path: /var/lib/edgegate",
                format!("        path: {}", hub_dir.display()),
            ),
            (
                "        path: /etc/kubernetes",
                format!("        path: {}", kubernetes_dir.display()),
            ),
            // The test's binary is a debug build, larger than the shipped one.
            (
                "          memory: 300Mi",
                "          memory: 1Gi".to_owned(),
            ),
        ],
    )?;
    testbed.node.run_gateway_as_static_pod(&manifest)?;
    bootstrap::approve_serving_request(&testbed.cloud.cluster, NODE)?;
    testbed.node.wait_ready(&testbed.cloud)?;
    let mirror = format!("edgegate-{NODE}");
    wait_until(
        Duration::from_secs(120),
        "edgegate's mirror pod ready",
        || {
            testbed
                .cloud
                .kubectl(&["get", "pod", &mirror, "-n", "kube-system", "-o", "json"])
                .is_ok_and(|text| {
                    serde_json::from_str::<serde_json::Value>(&text)
                        .is_ok_and(|pod| pod["status"]["containerStatuses"][0]["ready"] == true)
                })
        },
    )?;
    let pair = hub_dir.join("pki/yurthub-current.pem");
    ensure!(
        pair.exists(),
        "no client certificate under the static pod's root dir"
    );

    start_reader(testbed)?;
    let pid = wait_until(Duration::from_secs(120), "the reader pod to run", || {
        testbed
            .node
            .containerd
            .pod_containers()
            .is_ok_and(|pods| pods.contains_key(POD))
    })
    .and_then(|()| {
        testbed
            .node
            .containerd
            .pod_containers()?
            .get(POD)
            .copied()
            .context("the reader pod stopped")
    })?;
    let host = environ(pid, "KUBERNETES_SERVICE_HOST")?;
    ensure!(
        host.as_deref() == Some(HUB),
        "the pod's apiserver is {host:?}"
    );
    let log = pod_log(NAMESPACE, POD)?;

    let online = SystemTime::now();
    wait_reads(&log, online, "online")?;
    ensure_cut(testbed)?;
    let cut = SystemTime::now();
    wait_reads(&log, cut, "with the link cut")?;
    testbed.link.restore()?;
    let back = SystemTime::now();
    wait_reads(&log, back, "after the link came back")?;
    let lines = log_lines(&log)?;
    let leaked: Vec<_> = lines
        .iter()
        .filter(|(_, l)| l.contains("secrets listed"))
        .collect();
    ensure!(leaked.is_empty(), "the pod read Secrets: {leaked:?}");
    testbed.node.wait_ready(&testbed.cloud)?;
    Ok(())
}

/// A namespace whose service account `reader` may list ConfigMaps (one is there) and not
/// Secrets (one is there), and the pod: busybox with the host's kubectl, listing both with
/// in-cluster config every 2 s and saying how each went.
fn start_reader(testbed: &Testbed) -> Result<()> {
    let cloud = &testbed.cloud;
    cloud.kubectl(&["create", "namespace", NAMESPACE])?;
    cloud.kubectl(&["create", "serviceaccount", "reader", "-n", NAMESPACE])?;
    cloud.kubectl(&[
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=configmaps",
        "-n",
        NAMESPACE,
    ])?;
    cloud.kubectl(&[
        "create",
        "rolebinding",
        "reader",
        "--role=reader",
        &format!("--serviceaccount={NAMESPACE}:reader"),
        "-n",
        NAMESPACE,
    ])?;
    cloud.kubectl(&[
        "create",
        "configmap",
        "cm-1",
        "--from-literal=k=v",
        "-n",
        NAMESPACE,
    ])?;
    cloud.kubectl(&[
        "create",
        "secret",
        "generic",
        "s-1",
        "--from-literal=k=v",
        "-n",
        NAMESPACE,
    ])?;
    // The token controller writes the account's token Secret; the pod needs it mounted.
    wait_until(Duration::from_secs(60), "the reader's token", || {
        cloud
            .kubectl(&[
                "get",
                "serviceaccount",
                "reader",
                "-n",
                NAMESPACE,
                "-o",
                "json",
            ])
            .is_ok_and(|t| t.contains("reader-token-"))
    })?;
    let script = format!(
        "while true; do \
           if out=$(/kubectl get --raw /api/v1/namespaces/{NAMESPACE}/configmaps 2>&1); then \
             case \"$out\" in *'\"cm-1\"'*) echo 'configmaps ok';; *) echo \"configmaps missing: $out\";; esac; \
           else echo \"configmaps failed: $out\"; fi; \
           if out=$(/kubectl get --raw /api/v1/namespaces/{NAMESPACE}/secrets 2>&1); then \
             case \"$out\" in *'\"s-1\"'*) echo 'secrets listed';; *) echo 'secrets not listed';; esac; \
           else echo 'secrets refused'; fi; \
           sleep 2; \
         done"
    );
    let kubectl = edgegate_testkit::Toolchain::provision()?.kubectl;
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": POD, "namespace": NAMESPACE},
        "spec": {
            "nodeName": NODE,
            "serviceAccountName": "reader",
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "kubectl", "hostPath": {"path": kubectl, "type": "File"}}],
            "containers": [{
                "name": "reader",
                "image": "edgegate/busybox:test",
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", script],
                "volumeMounts": [{"name": "kubectl", "mountPath": "/kubectl", "readOnly": true}],
            }],
        },
    });
    apply(testbed, &pod.to_string())
}

/// The log file of a pod's only container, as kubelet writes it under `/var/log/pods`.
fn pod_log(namespace: &str, pod: &str) -> Result<PathBuf> {
    let prefix = format!("{namespace}_{pod}_");
    let mut found = None;
    wait_until(Duration::from_secs(60), "the pod's log file", || {
        found = std::fs::read_dir("/var/log/pods").ok().and_then(|dirs| {
            dirs.filter_map(|d| d.ok())
                .find(|d| d.file_name().to_string_lossy().starts_with(&prefix))
                .map(|d| d.path().join(pod).join("0.log"))
                .filter(|p| p.exists())
        });
        found.is_some()
    })?;
    found.context("the pod's log file")
}

/// The lines of a CRI log file with their times.
fn log_lines(path: &Path) -> Result<Vec<(SystemTime, String)>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, ' ');
            let time = humantime::parse_rfc3339_weak(fields.next()?).ok()?;
            let (_stream, _tag) = (fields.next()?, fields.next()?);
            Some((time, fields.next()?.to_owned()))
        })
        .collect())
}

/// Waits until, after `since`, the pod listed its ConfigMaps three times in a row and was
/// never shown the Secrets; `when` names the moment in the failure.
fn wait_reads(log: &Path, since: SystemTime, when: &str) -> Result<()> {
    let mut last = Vec::new();
    let read = wait_until(
        Duration::from_secs(120),
        &format!("three ConfigMap lists in a row {when}"),
        || {
            let Ok(lines) = log_lines(log) else {
                return false;
            };
            last = lines
                .into_iter()
                .filter(|(t, l)| *t > since && l.starts_with("configmaps"))
                .map(|(_, l)| l)
                .collect();
            last.len() >= 3 && last[last.len() - 3..].iter().all(|l| l == "configmaps ok")
        },
    );
    read.with_context(|| last.join("\n"))
}
