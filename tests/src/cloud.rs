//! The cloud a node joins: etcd, kube-apiserver on the host's end of the node's link, and
//! kube-controller-manager, so that EndpointSlices, node lifecycle, service accounts and
//! CSR signing work as in a real cluster.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::cluster::{Cluster, ClusterOptions, Etcd};
use crate::netns::Link;
use crate::process::{Process, wait_until};
use crate::toolchain::Toolchain;

/// The node's Services range: in 198.18.0.0/15 like everything the node sees, and apart
/// from the e2e clusters' 10.96.0.0/16.
pub const SERVICE_CIDR: &str = "198.19.128.0/17";

/// The NodePool CRD (apps.openyurt.io/v1beta1) and, as OpenYurt's `yurt-hub` ClusterRole
/// grants them, a role for nodes to read NodePools and the `kube-system/yurt-hub-cfg`
/// ConfigMap.
const OPENYURT: &str = r#"{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"nodepools.apps.openyurt.io"},
 "spec":{"group":"apps.openyurt.io","scope":"Cluster",
  "names":{"plural":"nodepools","singular":"nodepool","kind":"NodePool","listKind":"NodePoolList"},
  "versions":[{"name":"v1beta1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}},
{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
 "metadata":{"name":"edgegate-yurt-hub"},
 "rules":[{"apiGroups":["apps.openyurt.io"],"resources":["nodepools"],"verbs":["get","list","watch"]},
  {"apiGroups":[""],"resources":["configmaps"],"resourceNames":["yurt-hub-cfg"],"verbs":["get","list","watch"]}]},
{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding",
 "metadata":{"name":"edgegate-yurt-hub"},
 "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"edgegate-yurt-hub"},
 "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"system:nodes"}]}]}"#;

/// The control plane of one node's cluster.
#[derive(Debug)]
pub struct Cloud {
    /// The apiserver (and its PKI, kubeconfigs, kubectl).
    pub cluster: Cluster,
    controller_manager: Process,
}

impl Cloud {
    /// Starts etcd, kube-apiserver on `link`'s host address and kube-controller-manager for
    /// the node `node`, and lets the node's identity (`system:nodes`) do what kube-proxy needs.
    pub fn start(tools: &Toolchain, link: &Link, node: &str) -> Result<Cloud> {
        let etcd = Arc::new(Etcd::start(tools)?);
        let options = ClusterOptions {
            address: link.host_ip().into(),
            service_cidr: SERVICE_CIDR.to_owned(),
            node: Some(node.to_owned()),
            controller_manager: true,
            // A node may join with a bootstrap token (edgegate's static pod does).
            bootstrap_token_auth: true,
        };
        let cluster = Cluster::start_with(tools, etcd, options)?;
        // kubeadm's controllers: the defaults, and those that sign cluster-info for bootstrap
        // tokens and remove expired ones.
        let controllers = "--controllers=*,bootstrapsigner,tokencleaner".to_owned();
        let mut controller_manager = crate::controller_manager::start(&cluster, &[controllers])?;
        // The node runs kube-proxy on its own identity (through the gateway), as YurtHub's
        // nodes do without a kube-proxy service account: grant it kube-proxy's role.
        cluster.kubectl(&[
            "create",
            "clusterrolebinding",
            "edgegate-node-proxier",
            "--clusterrole=system:node-proxier",
            "--group=system:nodes",
        ])?;
        // An OpenYurt cluster serves NodePools, and YurtHub's role lets nodes read them and
        // yurt-hub-cfg: the gateway's informers look NodePools up (servicetopology), and it
        // is ready once they synced; it follows yurt-hub-cfg.
        cluster.apply(OPENYURT)?;
        // Pods need their namespace's service account, which the controllers create.
        let accounts = wait_until(
            Duration::from_secs(60),
            "the default service account",
            || {
                cluster
                    .kubectl(&["get", "serviceaccount", "default", "-n", "default"])
                    .is_ok()
            },
        );
        if let Err(error) = accounts {
            controller_manager.check_running()?;
            return Err(error);
        }
        Ok(Cloud {
            cluster,
            controller_manager,
        })
    }

    /// Runs kubectl against the apiserver directly, as admin; returns stdout.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        self.cluster.kubectl(args)
    }

    /// Fails with the log's tail if kube-controller-manager has exited.
    pub fn check_running(&mut self) -> Result<()> {
        self.controller_manager.check_running()
    }
}
