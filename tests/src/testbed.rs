//! One node behind edgegate and its cloud, joined by a link that tests cut: what
//! `tests/node` and `cargo dev --node` bring up.

use std::fs::{File, TryLockError};

use anyhow::{Context, Result};

use crate::cloud::Cloud;
use crate::netns::{Link, LinkKind};
use crate::node::{GatewayCommand, Node};
use crate::toolchain::Toolchain;

/// The filters edgegate runs on the node: YurtHub's seven (docs/filters/yurthub-filters.md).
pub const FILTERS: &[&str] = &[
    "masterservice",
    "servicetopology",
    "discard-cloud-service",
    "nodeportisolation",
    "inclusterconfig",
    "forwardkubesvctraffic",
    "serviceenvupdater",
];

/// The node's name.
pub const NODE: &str = "edge-1";

/// Held by the one test bed of this machine: node test beds share kubelet's `/var/log/pods`,
/// kernel settings and the host's addresses, so a second one waits for the first to go.
const EXCLUSIVE: &str = "/run/lock/edgegate-node-testbed.lock";

/// A node, its cloud and the link between them. Dropped in that order: the node's processes,
/// mounts and containers first, then the cloud, then the namespace, and then the machine is
/// free for the next test bed.
#[derive(Debug)]
pub struct Testbed {
    /// The node.
    pub node: Node,
    /// The cloud.
    pub cloud: Cloud,
    /// The link.
    pub link: Link,
    /// This machine's test bed lock ([`EXCLUSIVE`]), released last.
    _exclusive: File,
}

impl Testbed {
    /// Brings up a LAN link, the cloud and the node (with `gateway` and [`FILTERS`]), and
    /// waits until the node is Ready.
    pub fn start(tools: &Toolchain, gateway: GatewayCommand) -> Result<Testbed> {
        Testbed::start_as(tools, gateway, &LinkKind::Lan)
    }

    /// [`Testbed::start`] over a link of `kind`.
    pub fn start_as(
        tools: &Toolchain,
        gateway: GatewayCommand,
        kind: &LinkKind,
    ) -> Result<Testbed> {
        tools.check_node()?;
        let exclusive = exclusive(EXCLUSIVE)?;
        let link = Link::create_as(kind)?;
        // As on a node whose uplink stays up when the WAN beyond it goes: the Services'
        // range keeps a route while the link is cut, so the node still reaches a ClusterIP
        // that kube-proxy sends to a local pod (the cut takes the default route with it).
        // (A veth pair standing in for a dummy device, which this kernel may not have.)
        link.run(
            "ip",
            &[
                "link",
                "add",
                "services",
                "type",
                "veth",
                "peer",
                "name",
                "services-end",
            ],
        )?;
        link.run("ip", &["link", "set", "services-end", "up"])?;
        link.run("ip", &["link", "set", "services", "up"])?;
        link.run(
            "ip",
            &[
                "route",
                "add",
                crate::cloud::SERVICE_CIDR,
                "dev",
                "services",
            ],
        )?;
        let cloud = Cloud::start(tools, &link, NODE)?;
        let node = Node::start(tools, &link, &cloud, NODE, gateway, FILTERS)?;
        Ok(Testbed {
            node,
            cloud,
            link,
            _exclusive: exclusive,
        })
    }
}

/// Takes this machine's test bed lock, waiting (and saying so) while another process holds
/// it; the kernel releases it when the holder exits, however it exits.
fn exclusive(path: &str) -> Result<File> {
    let file = File::create(path).with_context(|| format!("creating {path}"))?;
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(TryLockError::WouldBlock) => {
            eprintln!("waiting for the node test bed of another process to stop ({path})");
        }
        Err(TryLockError::Error(error)) => {
            return Err(error).with_context(|| format!("locking {path}"));
        }
    }
    file.lock().with_context(|| format!("locking {path}"))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_test_bed_holds_the_lock_until_it_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("testbed.lock");
        let path = path.to_str().unwrap();
        let first = exclusive(path).unwrap();
        let second = File::create(path).unwrap();
        assert!(matches!(second.try_lock(), Err(TryLockError::WouldBlock)));
        drop(first);
        assert!(exclusive(path).is_ok());
    }
}
