//! (b) What the node's components receive is the filtered cloud: kube-proxy programs only
//! this node's endpoints of a Service that asks for it (servicetopology), and kubelet gives
//! pods the gateway as their apiserver (masterservice); then each of the other five
//! filters, once, on what kubelet or kube-proxy received.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::Testbed;
use edgegate_testkit::process::wait_until;
use edgegate_testkit::scenario::{self, destinations, service, wait_pod_containers};
use edgegate_testkit::testbed::NODE;

use crate::support::{apply, environ, pod_status, pod_tasks, requests, wait_pods_running};

/// An endpoint on a node that does not exist here: only the cloud knows it.
const ELSEWHERE: &str = "198.19.127.7";

/// A hand-made EndpointSlice of `service`: `local` on this node, [`ELSEWHERE`] on `edge-2`.
fn slice(service: &str, local: &str) -> String {
    scenario::slice(
        service,
        &format!("{service}-by-hand"),
        &[(local, NODE), (ELSEWHERE, "edge-2")],
    )
}

/// kube-proxy, fed through the gateway, programs both endpoints of a plain Service and
/// only this node's of one annotated `openyurt.io/topologyKeys: kubernetes.io/hostname`;
/// taking that annotation away and giving it back reaches kube-proxy on its open watch; a
/// pod's `KUBERNETES_SERVICE_HOST`/`_PORT` are the gateway's (169.254.2.1:10268), as
/// masterservice rewrote `default/kubernetes` for kubelet.
pub fn kube_proxy_and_pods_see_the_filtered_cloud(testbed: &mut Testbed) -> Result<()> {
    if testbed.link.is_cut() {
        testbed.link.restore()?;
    }
    let ids = wait_pods_running(testbed, &["host", "bridge"])?;
    let bridge = pod_status(testbed, "bridge")?;
    let local = bridge["status"]["podIP"]
        .as_str()
        .context("the bridge pod has no IP")?
        .to_owned();
    for (name, topology) in [("spread", false), ("local-only", true)] {
        apply(testbed, &service(name, topology))?;
        apply(testbed, &slice(name, &local))?;
    }
    let mut both = vec![ELSEWHERE.to_owned(), local.clone()];
    both.sort();
    let programmed = wait_until(
        Duration::from_secs(90),
        "kube-proxy to program both Services",
        || {
            testbed.node.proxy_rules().is_ok_and(|rules| {
                destinations(&rules, "spread") == both
                    && destinations(&rules, "local-only") == [local.clone()]
            })
        },
    );
    if let Err(error) = programmed {
        let rules = testbed.node.proxy_rules()?;
        return Err(error.context(format!(
            "spread → {:?}, local-only → {:?}",
            destinations(&rules, "spread"),
            destinations(&rules, "local-only")
        )));
    }

    refiltered_in_place(testbed, &local, &both)?;

    let tasks = pod_tasks(testbed, &ids)?;
    for (pod, id) in &ids {
        let pid = *tasks
            .get(id)
            .with_context(|| format!("{pod}'s container does not run"))?;
        let host = environ(pid, "KUBERNETES_SERVICE_HOST")?;
        let port = environ(pid, "KUBERNETES_SERVICE_PORT")?;
        ensure!(
            host.as_deref() == Some("169.254.2.1") && port.as_deref() == Some("10268"),
            "pod {pod} was given KUBERNETES_SERVICE_HOST={host:?}, _PORT={port:?}"
        );
    }
    Ok(())
}

/// The lists and watches of EndpointSlices the gateway's multiplexer has answered since it
/// started (kube-proxy's, as no other client of the node reads them).
fn slices_served(testbed: &Testbed) -> Result<f64> {
    let (_, metrics) = testbed.node.hub("/metrics")?;
    Ok(metrics
        .lines()
        .filter(|l| l.starts_with("edgegate_multiplexer_answers_total{"))
        .filter(|l| l.contains("endpointslices"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum())
}

/// The topology of `local-only` taken away and given back: kube-proxy programs both
/// endpoints, then only this node's again, each from the slice its open watch is sent again
/// re-filtered (Deliver 4 of the traffic issue), without a re-list.
///
/// kube-proxy's lists are counted whichever way they went (a list newer than the shared
/// state goes to the cloud). A gateway restarted by an earlier scenario may have served
/// kube-proxy only a resumed watch, so what shows the multiplexer in its path is any answer.
fn refiltered_in_place(testbed: &Testbed, local: &str, both: &[String]) -> Result<()> {
    let served = slices_served(testbed)?;
    ensure!(
        served >= 1.0,
        "kube-proxy reads its EndpointSlices through the multiplexer ({served} lists and watches answered)"
    );
    let lists = || requests(testbed, "kube-proxy", "list", "endpointslices");
    let before = lists()?;
    let annotate = |value: &str| {
        testbed.cloud.kubectl(&[
            "annotate",
            "--overwrite",
            "service",
            "local-only",
            "-n",
            "default",
            value,
        ])
    };
    for (annotation, wanted) in [
        ("openyurt.io/topologyKeys-", both.to_vec()),
        (
            "openyurt.io/topologyKeys=kubernetes.io/hostname",
            vec![local.to_owned()],
        ),
    ] {
        annotate(annotation)?;
        wait_until(
            Duration::from_secs(60),
            &format!("kube-proxy to program {wanted:?} for local-only after {annotation}"),
            || {
                testbed
                    .node
                    .proxy_rules()
                    .is_ok_and(|rules| destinations(&rules, "local-only") == wanted)
            },
        )?;
    }
    let after = lists()?;
    ensure!(
        after == before,
        "kube-proxy re-listed EndpointSlices ({before} lists before, {after} after): its watch was ended, not re-filtered"
    );
    Ok(())
}

/// The pool this node is put in (its `apps.openyurt.io/nodepool` label), which
/// nodeportisolation reads.
const POOL: &str = "pool-a";

/// Where the node's filters send pods and kube-proxy: their default hub address, as the
/// node's filter dir holds no `NAME.toml` (docs/filters/yurthub-filters.md).
const HUB: (&str, &str) = ("169.254.2.1", "10268");

/// The pod that mounts kube-proxy's ConfigMap and sets the apiserver's address itself.
const REWRITTEN: &str = "rewritten";

/// The address [`REWRITTEN`] sets as `KUBERNETES_SERVICE_HOST`/`_PORT` (a CNI plugin would).
const SELF_SET: (&str, &str) = ("198.19.127.30", "6443");

/// kube-proxy's config in `kube-system/kube-proxy`, as kubeadm writes it.
const PROXY_CONFIG: &str = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n\
    clientConnection:\n  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\nmode: iptables\n";

/// [`PROXY_CONFIG`] as inclusterconfig leaves it: the `kubeconfig:` line commented out.
const PROXY_CONFIG_IN_CLUSTER: &str = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n\
    clientConnection:\n  #kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\nmode: iptables\n";

/// A NodePort Service without a selector, annotated `nodeport.openyurt.io/listen: listen`
/// if some.
fn node_port(name: &str, listen: Option<&str>) -> String {
    let annotations = match listen {
        Some(pools) => serde_json::json!({"nodeport.openyurt.io/listen": pools}),
        None => serde_json::json!({}),
    };
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"type": "NodePort", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    })
    .to_string()
}

/// A LoadBalancer Service without a selector, annotated `svc.openyurt.io/discard: "true"`
/// if `discard` (a cloud load balancer the edge has no use for).
fn load_balancer(name: &str, discard: bool) -> String {
    let annotations = if discard {
        serde_json::json!({"svc.openyurt.io/discard": "true"})
    } else {
        serde_json::json!({})
    };
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    })
    .to_string()
}

/// Whether any of kube-proxy's rules is `service`'s.
fn has_rules(rules: &[String], service: &str) -> bool {
    let comment = format!("default/{service}:http");
    rules.iter().any(|r| r.contains(&comment))
}

/// A host-network pod in `kube-system` with kube-proxy's ConfigMap at `/etc/kube-proxy`,
/// setting `KUBERNETES_SERVICE_HOST`/`_PORT` to [`SELF_SET`].
fn rewritten() -> String {
    let mut pod = scenario::pod(REWRITTEN, true);
    pod["metadata"]["namespace"] = "kube-system".into();
    pod["spec"]["volumes"] =
        serde_json::json!([{"name": "proxy", "configMap": {"name": "kube-proxy"}}]);
    let container = &mut pod["spec"]["containers"][0];
    container["volumeMounts"] =
        serde_json::json!([{"name": "proxy", "mountPath": "/etc/kube-proxy"}]);
    container["env"] = serde_json::json!([
        {"name": "KUBERNETES_SERVICE_HOST", "value": SELF_SET.0},
        {"name": "KUBERNETES_SERVICE_PORT", "value": SELF_SET.1},
    ]);
    pod.to_string()
}

/// The ConfigMap `kube-system/kube-proxy` holding [`PROXY_CONFIG`].
fn proxy_config_map() -> String {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
        "data": {"config.conf": PROXY_CONFIG},
    })
    .to_string()
}

/// Whether kube-proxy opens `service`'s node port (a KUBE-NODEPORTS rule for it).
fn opens_node_port(rules: &[String], service: &str) -> bool {
    let comment = format!("\"default/{service}:http\"");
    rules
        .iter()
        .any(|r| r.starts_with("-A KUBE-NODEPORTS ") && r.contains(&comment))
}

/// Where kube-proxy sends `default/kubernetes`: the DNAT targets (address:port) of its
/// endpoint chains, sorted.
fn kubernetes_destinations(rules: &[String]) -> Vec<String> {
    let mut found: Vec<String> = rules
        .iter()
        .filter(|r| r.starts_with("-A KUBE-SEP-") && r.contains("\"default/kubernetes:https\""))
        .filter_map(|r| r.split("--to-destination ").nth(1))
        .map(|d| d.split(' ').next().unwrap_or(d).to_owned())
        .collect();
    found.sort();
    found
}

/// Puts the node in [`POOL`] and waits until the gateway's filters know it.
fn join_pool(testbed: &Testbed) -> Result<()> {
    // The gateway logs each change of this node's pool; a line an earlier test left must not
    // pass for this join (the filters would still see the old pool).
    let changes = || -> Vec<String> {
        testbed
            .node
            .log("edgegate")
            .lines()
            .filter(|l| l.contains("this node's pool"))
            .map(str::to_owned)
            .collect()
    };
    let quoted = format!("\"{POOL}\"");
    let before = changes();
    let already = before.last().is_some_and(|l| l.contains(&quoted));
    let label = format!("apps.openyurt.io/nodepool={POOL}");
    testbed
        .cloud
        .kubectl(&["label", "node", NODE, &label, "--overwrite"])?;
    wait_until(
        Duration::from_secs(60),
        "the gateway to learn the node's pool",
        || {
            let now = changes();
            now.last().is_some_and(|l| l.contains(&quoted)) && (already || now.len() > before.len())
        },
    )
}

/// The other five filters, each on what the real component receives:
/// nodeportisolation — kube-proxy opens no node port for a NodePort Service annotated
/// `nodeport.openyurt.io/listen` with another pool than the node's, but does for an
/// unannotated one; discard-cloud-service — kube-proxy has no rule for a LoadBalancer
/// annotated `svc.openyurt.io/discard: "true"`, but opens an unannotated one's node port; forwardkubesvctraffic — kube-proxy sends `default/kubernetes` to the
/// hub address; inclusterconfig — a pod's volume of `kube-system/kube-proxy` has its
/// `kubeconfig:` line commented out (the cloud's copy unchanged); serviceenvupdater — a
/// container that sets `KUBERNETES_SERVICE_HOST`/`_PORT` itself runs with the hub's. Every
/// filter's verdict is reported, not only the first failing one. Leaves the node as it
/// found it.
pub fn the_other_filters_reach_kubelet_and_kube_proxy(testbed: &mut Testbed) -> Result<()> {
    if testbed.link.is_cut() {
        testbed.link.restore()?;
    }
    join_pool(testbed)?;
    apply(testbed, &proxy_config_map())?;
    apply(testbed, &rewritten())?;
    // The isolated and the discarded Services and their slices first: each reaches
    // kube-proxy on its stream before the open and the kept ones, so kube-proxy has them
    // all when it programs those.
    for (name, service, address) in [
        (
            "np-isolated",
            node_port("np-isolated", Some("other-pool")),
            "198.19.127.31",
        ),
        (
            "lb-discarded",
            load_balancer("lb-discarded", true),
            "198.19.127.33",
        ),
        ("np-open", node_port("np-open", None), "198.19.127.32"),
        ("lb-kept", load_balancer("lb-kept", false), "198.19.127.34"),
    ] {
        apply(testbed, &service)?;
        apply(
            testbed,
            &scenario::slice(name, &format!("{name}-by-hand"), &[(address, NODE)]),
        )?;
    }
    wait_until(
        Duration::from_secs(90),
        "kube-proxy to open np-open's and lb-kept's node ports",
        || {
            testbed.node.proxy_rules().is_ok_and(|rules| {
                opens_node_port(&rules, "np-open") && opens_node_port(&rules, "lb-kept")
            })
        },
    )?;

    let mut failures = Vec::new();
    let rules = testbed.node.proxy_rules()?;
    if opens_node_port(&rules, "np-isolated") {
        failures.push("nodeportisolation: kube-proxy opened np-isolated's node port".to_owned());
    }
    if has_rules(&rules, "lb-discarded") {
        failures.push(
            "discard-cloud-service: kube-proxy has rules for the discarded LoadBalancer".to_owned(),
        );
    }
    let hub = format!("{}:{}", HUB.0, HUB.1);
    let kubernetes = kubernetes_destinations(&rules);
    if kubernetes != [hub.clone()] {
        failures.push(format!(
            "forwardkubesvctraffic: kube-proxy sends default/kubernetes to {kubernetes:?}, not {hub}"
        ));
    }

    // Its task is listed from its creation; its environment is the container's once runc
    // has started the command in it (kubelet sets KUBERNETES_SERVICE_HOST for every pod).
    let mut pid = 0;
    wait_until(
        Duration::from_secs(60),
        "the rewritten pod's command to start",
        || {
            let Ok(pids) = wait_pod_containers(testbed, &[REWRITTEN]) else {
                return false;
            };
            pid = pids[REWRITTEN];
            environ(pid, "KUBERNETES_SERVICE_HOST").is_ok_and(|host| host.is_some())
        },
    )?;
    let env = (
        environ(pid, "KUBERNETES_SERVICE_HOST")?,
        environ(pid, "KUBERNETES_SERVICE_PORT")?,
    );
    if env != (Some(HUB.0.to_owned()), Some(HUB.1.to_owned())) {
        failures.push(format!(
            "serviceenvupdater: the container runs with KUBERNETES_SERVICE_HOST, _PORT = {env:?}"
        ));
    }

    let uid = testbed.cloud.kubectl(&[
        "get",
        "pod",
        REWRITTEN,
        "-n",
        "kube-system",
        "-o",
        "jsonpath={.metadata.uid}",
    ])?;
    let file = testbed.node.dir.join(format!(
        "kubelet/pods/{}/volumes/kubernetes.io~configmap/proxy/config.conf",
        uid.trim()
    ));
    let volume =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let cloud = testbed.cloud.kubectl(&[
        "get",
        "configmap",
        "kube-proxy",
        "-n",
        "kube-system",
        "-o",
        "jsonpath={.data.config\\.conf}",
    ])?;
    if volume != PROXY_CONFIG_IN_CLUSTER || cloud != PROXY_CONFIG {
        failures.push(format!(
            "inclusterconfig: the pod's volume holds {volume:?}, the cloud's copy {cloud:?}"
        ));
    }

    leave_as_found(testbed)?;
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// Deletes what [`the_other_filters_reach_kubelet_and_kube_proxy`] made and takes the node
/// out of [`POOL`]: a gateway restarted later (the power-off) must not serve kube-proxy a
/// Service the pool hid, before it knows the pool again. Waits until kube-proxy dropped the
/// open and the kept node ports.
fn leave_as_found(testbed: &Testbed) -> Result<()> {
    let cloud = &testbed.cloud;
    cloud.kubectl(&["delete", "pod", REWRITTEN, "-n", "kube-system"])?;
    cloud.kubectl(&[
        "delete",
        "service",
        "np-isolated",
        "np-open",
        "lb-discarded",
        "lb-kept",
        "-n",
        "default",
    ])?;
    cloud.kubectl(&[
        "delete",
        "endpointslice",
        "np-isolated-by-hand",
        "np-open-by-hand",
        "lb-discarded-by-hand",
        "lb-kept-by-hand",
        "-n",
        "default",
    ])?;
    cloud.kubectl(&["label", "node", NODE, "apps.openyurt.io/nodepool-"])?;
    wait_until(
        Duration::from_secs(90),
        "kube-proxy to close np-open's and lb-kept's node ports",
        || {
            testbed.node.proxy_rules().is_ok_and(|rules| {
                !opens_node_port(&rules, "np-open") && !opens_node_port(&rules, "lb-kept")
            })
        },
    )
}
