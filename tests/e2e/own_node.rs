//! What the tests of the node's own writes share: a node of the test's own behind a relay
//! to the shared apiserver (so a test can cut it off), its gateway, and the Node and the
//! pod kubelet would write.

use anyhow::Result;
use edgegate_testkit::{Gateway, Relay};

use crate::support::{Env, apply, namespace, unique};

/// A node of the test's own and its gateway.
pub struct OwnNode {
    /// The node's name (`--node-name`).
    pub node: String,
    /// A namespace of the test's own.
    pub ns: String,
    /// The link to the shared apiserver.
    pub relay: Relay,
    /// The gateway, through `relay`.
    pub gateway: Gateway,
}

impl OwnNode {
    /// A node `edge-{prefix}-…` with a namespace `{prefix}-…`, and its gateway behind a relay
    /// with `--node-name`, a heartbeat a second (a cut is found at once) and `extra`.
    pub fn start(env: &Env, prefix: &str, extra: &[&str]) -> Result<OwnNode> {
        let node = unique(&format!("edge-{prefix}"));
        let ns = namespace(&env.cluster, prefix)?;
        let relay = Relay::start(([127, 0, 0, 1], env.cluster.port).into())?;
        let node_name = format!("--node-name={node}");
        let mut flags = vec!["--heartbeat-interval-seconds=1", node_name.as_str()];
        flags.extend(extra);
        let gateway = Gateway::start_to(&env.bin, &env.cluster, &relay.url(), &flags)?;
        Ok(OwnNode {
            node,
            ns,
            relay,
            gateway,
        })
    }

    /// Creates the Node and its pod `web` in the cloud, through the apiserver directly.
    pub fn with_web_pod(self, env: &Env) -> Result<OwnNode> {
        let (node, ns) = (&self.node, &self.ns);
        apply(
            &env.cluster,
            &self.gateway.dir,
            "node.json",
            &format!(r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{node}"}}}}"#),
        )?;
        apply(
            &env.cluster,
            &self.gateway.dir,
            "pod.json",
            &format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"web","namespace":"{ns}"}},"spec":{{"nodeName":"{node}","containers":[{{"name":"web","image":"registry.invalid/web:1"}}]}}}}"#
            ),
        )?;
        Ok(self)
    }
}
