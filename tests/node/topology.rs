//! (b) What the node's components receive is the filtered cloud: kube-proxy programs only
//! this node's endpoints of a Service that asks for it (servicetopology), and kubelet gives
//! pods the gateway as their apiserver (masterservice).

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::Testbed;
use edgegate_testkit::process::wait_until;
use edgegate_testkit::scenario::{self, destinations, service};
use edgegate_testkit::testbed::NODE;

use crate::support::{apply, environ, pod_status, pod_tasks, wait_pods_running};

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
/// a pod's `KUBERNETES_SERVICE_HOST`/`_PORT` are the gateway's (169.254.2.1:10268), as
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
