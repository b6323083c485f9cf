//! The real upstream: etcd and kube-apiserver 1.20.2 from the test harness (provisioned and
//! cached under `~/.cache/edgegate`), holding the same objects the static upstream serves.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use edgegate_testkit::{ADMIN_TOKEN, Cluster, Etcd, Toolchain};
use serde_json::{Value, json};

use super::targets::Upstream;
use super::workload::{LIST_NAMESPACES, WATCH_NAMESPACE};
use crate::fixtures::{
    NODE_LOCAL_SERVICE, PLAIN_SERVICE, endpoint_slice_v1beta1, service_to_create,
};

/// A running control plane, kept alive for the run.
pub struct ApiServer {
    /// The cluster (its drop stops kube-apiserver).
    pub cluster: Cluster,
    _etcd: Arc<Etcd>,
}

impl ApiServer {
    /// Starts etcd and kube-apiserver and creates the benchmark's objects.
    pub fn start() -> Result<ApiServer> {
        let tools = Toolchain::provision()?;
        let etcd = Arc::new(Etcd::start(&tools)?);
        let cluster = Cluster::start(&tools, etcd.clone())?;
        let server = ApiServer {
            cluster,
            _etcd: etcd,
        };
        server.create_objects()?;
        Ok(server)
    }

    /// The upstream as the targets see it: requests carry the admin token; edgegate's own
    /// requests (informers, heartbeat) use its client certificate.
    pub fn upstream(&self) -> Upstream {
        Upstream {
            name: "kube-apiserver 1.20.2".to_owned(),
            url: self.cluster.url(),
            kubeconfig: Some(self.cluster.gateway_kubeconfig.clone()),
            ca: Some(self.cluster.pki.ca_cert.clone()),
            token: Some(ADMIN_TOKEN.to_owned()),
        }
    }

    fn create(&self, name: &str, items: Vec<Value>) -> Result<()> {
        let file = self.cluster.dir.join(format!("{name}.json"));
        std::fs::write(
            &file,
            json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
        )?;
        let started = Instant::now();
        self.cluster
            .kubectl(&["create", "-f", &file.display().to_string(), "-o", "name"])?;
        eprintln!("load: created {name} in {:.1?}", started.elapsed());
        Ok(())
    }

    fn create_objects(&self) -> Result<()> {
        let namespaces: Vec<&str> = LIST_NAMESPACES
            .iter()
            .map(|(ns, _)| *ns)
            .chain(["bench", WATCH_NAMESPACE])
            .collect();
        let mut basics: Vec<Value> = namespaces
            .iter()
            .map(|ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .collect();
        basics.push(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "small", "namespace": "bench"},
            "data": {"config.yaml": "mode: iptables\nclusterCIDR: 10.244.0.0/16\n"},
        }));
        self.create("namespaces", basics)?;
        let mut services = Vec::new();
        for ns in &namespaces {
            services.push(service_to_create(
                ns,
                NODE_LOCAL_SERVICE,
                Some("kubernetes.io/hostname"),
            ));
            services.push(service_to_create(ns, PLAIN_SERVICE, None));
        }
        self.create("services", services)?;
        for (ns, count) in LIST_NAMESPACES {
            let slices = (0..count)
                .map(|i| {
                    let service = if i % 2 == 0 {
                        NODE_LOCAL_SERVICE
                    } else {
                        PLAIN_SERVICE
                    };
                    endpoint_slice_v1beta1(ns, &format!("{service}-{i:06}"), service)
                })
                .collect();
            self.create(&format!("slices-{ns}"), slices)?;
        }
        Ok(())
    }
}
