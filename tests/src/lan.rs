//! A node pool's LAN: one network namespace per node, all on one bridge, behind one WAN link
//! to the host (where the cloud listens), as the nodes of an edge site share one switch and
//! one uplink.
//!
//! The uplink is a [`Link`] whose namespace is the site's router: its end of the link
//! (`198.18.N.2`) and a bridge holding the LAN `198.19.N.0/24` (the router `.1`, node `i` at
//! `.10 + i`), forwarding between them. The host routes the LAN through the link, so the
//! cloud answers the nodes' own addresses. Cutting the link partitions the site from the
//! cloud; the LAN stays up.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use nix::sched::CloneFlags;

use crate::netns::{Link, LinkKind, run};

/// The site's routers' bridge inside their namespace.
const BRIDGE: &str = "lan0";

/// The nodes' namespaces on one bridge behind one WAN link; all deleted on drop.
#[derive(Debug)]
pub struct Lan {
    /// The site's uplink (its namespace is the router's).
    pub uplink: Link,
    nodes: Vec<String>,
}

impl Lan {
    /// Creates the router behind a link of `kind`, its bridge, and `nodes` nodes on it.
    pub fn create(nodes: usize, kind: &LinkKind) -> Result<Lan> {
        anyhow::ensure!(nodes <= 200, "a LAN of {nodes} nodes does not fit a /24");
        let uplink = Link::create_as(kind)?;
        let mut lan = Lan {
            uplink,
            nodes: Vec::new(),
        };
        let router = lan.uplink.name.clone();
        let gateway = lan.gateway_ip();
        lan.uplink
            .run("sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
        ip_in(&router, &["link", "add", BRIDGE, "type", "bridge"])?;
        ip_in(
            &router,
            &["addr", "add", &format!("{gateway}/24"), "dev", BRIDGE],
        )?;
        ip_in(&router, &["link", "set", BRIDGE, "up"])?;
        for index in 0..nodes {
            // Named like the link's namespace, for the sweep after a harness killed outright.
            let name = format!(
                "{}{}n{index}-{}",
                crate::sweep::NETNS_PREFIX,
                lan.uplink.index,
                std::process::id()
            );
            run(Command::new("ip").args(["netns", "add", &name]))?;
            lan.nodes.push(name.clone());
            let port = format!("port{index}");
            ip_in(
                &router,
                &[
                    "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &name,
                ],
            )?;
            ip_in(&router, &["link", "set", &port, "master", BRIDGE, "up"])?;
            let cidr = format!("{}/24", lan.node_ip(index));
            ip_in(&name, &["link", "set", "lo", "up"])?;
            ip_in(&name, &["addr", "add", &cidr, "dev", "eth0"])?;
            ip_in(&name, &["link", "set", "eth0", "up"])?;
            ip_in(
                &name,
                &["route", "add", "default", "via", &gateway.to_string()],
            )?;
        }
        // The cloud's way back to the nodes; it goes with the host's end of the link.
        run(Command::new("ip").args([
            "route",
            "add",
            &lan.cidr(),
            "via",
            &lan.uplink.node_ip().to_string(),
            "dev",
            &lan.uplink.host_if,
        ]))?;
        Ok(lan)
    }

    /// The LAN's range.
    fn cidr(&self) -> String {
        format!("198.19.{}.0/24", self.uplink.index)
    }

    /// The router's address on the LAN.
    fn gateway_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(198, 19, self.uplink.index, 1)
    }

    /// Node `index`'s address.
    pub fn node_ip(&self, index: usize) -> Ipv4Addr {
        // `create` keeps `index` under 200.
        Ipv4Addr::new(198, 19, self.uplink.index, 10 + index as u8)
    }

    /// Node `index`'s namespace file, for `nsenter --net=`.
    pub fn node_netns(&self, index: usize) -> PathBuf {
        Path::new("/run/netns").join(&self.nodes[index])
    }

    /// Moves the calling thread into the router's namespace, on the LAN, until the guard
    /// drops: what the thread then connects to or starts (a `kubectl`, a blocking request,
    /// a runtime's `block_on`) reaches the nodes over the LAN, and the cloud over the uplink,
    /// as a machine at the site would. Spawned tasks need a runtime of the router's as well
    /// ([`Link::runtime`] of [`Lan::uplink`]).
    pub fn enter(&self) -> Result<OnSite> {
        let home = std::fs::File::open("/proc/thread-self/ns/net")
            .context("opening this thread's network namespace")?;
        let site = std::fs::File::open(self.uplink.path())
            .with_context(|| format!("opening {}", self.uplink.path().display()))?;
        nix::sched::setns(&site, CloneFlags::CLONE_NEWNET).context("joining the site's LAN")?;
        Ok(OnSite { home })
    }

    /// The bytes that crossed the uplink so far: (site → cloud, cloud → site), as the
    /// host's end counts them (IP packets, headers included).
    pub fn uplink_bytes(&self) -> Result<(u64, u64)> {
        let stat = |name: &str| -> Result<u64> {
            let path = format!("/sys/class/net/{}/statistics/{name}", self.uplink.host_if);
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
            Ok(text.trim().parse()?)
        };
        Ok((stat("rx_bytes")?, stat("tx_bytes")?))
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        // The nodes' ends of the veths go with their namespaces, and the router's with them;
        // the uplink removes the router's namespace.
        for name in &self.nodes {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

/// A thread on the site's LAN ([`Lan::enter`]); back in its own network on drop.
#[derive(Debug)]
pub struct OnSite {
    home: std::fs::File,
}

impl Drop for OnSite {
    fn drop(&mut self) {
        if let Err(error) = nix::sched::setns(&self.home, CloneFlags::CLONE_NEWNET) {
            // A harness thread left on the LAN would reach the wrong loopback from here on.
            if std::thread::panicking() {
                eprintln!("a thread cannot return to its network namespace: {error}");
            } else {
                panic!("a thread cannot return to its network namespace: {error}");
            }
        }
    }
}

/// `ip args` inside namespace `name`.
fn ip_in(name: &str, args: &[&str]) -> Result<()> {
    run(Command::new("ip").arg("-n").arg(name).args(args)).map(drop)
}
