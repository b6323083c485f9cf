//! One node behind edgegate and its cloud, joined by a link that tests cut: what
//! `tests/node` and `cargo dev --node` bring up.

use anyhow::Result;

use crate::cloud::Cloud;
use crate::netns::{Link, LinkKind};
use crate::node::{GatewayCommand, Node};
use crate::toolchain::Toolchain;

/// The filters edgegate runs on the node: YurtHub's seven (README "The YurtHub filters").
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

/// A node, its cloud and the link between them. Dropped in that order: the node's processes,
/// mounts and containers first, then the cloud, then the namespace.
#[derive(Debug)]
pub struct Testbed {
    /// The node.
    pub node: Node,
    /// The cloud.
    pub cloud: Cloud,
    /// The link.
    pub link: Link,
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
        let link = Link::create_as(kind)?;
        let cloud = Cloud::start(tools, &link, NODE)?;
        let node = Node::start(tools, &link, &cloud, NODE, gateway, FILTERS)?;
        Ok(Testbed { node, cloud, link })
    }
}
