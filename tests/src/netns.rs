//! The cloud link of a node: a network namespace joined to the host by a veth pair, with
//! addresses from 198.18.0.0/15 (reserved for network tests, RFC 2544), so nothing it
//! reaches can exist elsewhere.
//!
//! Each link gets a free /30 in `198.18.N.0` (the host side `.1`, the node side `.2`) and the
//! node's pods the range `198.19.N.0/24`; `N` is the first index no interface of the host
//! uses yet. "The link drops" means the node's end goes down: the node then loses its
//! route and reaches nothing, while the host keeps its own address (the apiserver stays up,
//! as it would in the cloud).
//!
//! A LAN link is a veth pair. A WAN link ([`Wan`]) is a TUN device at each end, the same
//! names and addresses, with the packets carried between them by a [`Forwarder`] that
//! delays, loses and rate-limits them (see [`crate::wan`] for why not `tc netem`).

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, PoisonError};

use anyhow::{Context, Result, bail};

use crate::wan::{Forwarder, Wan, tun_device};

/// What joins the node to the host.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LinkKind {
    /// A veth pair: no delay, no loss.
    #[default]
    Lan,
    /// TUN devices joined by a WAN emulator.
    Wan(Wan),
}

impl LinkKind {
    /// `lan`, or `wan` with what it does.
    pub fn describe(&self) -> String {
        match self {
            LinkKind::Lan => "lan (a veth pair)".to_owned(),
            LinkKind::Wan(wan) => format!(
                "wan ({:?} each way, {} % loss, {} kbit/s, a {} KiB queue)",
                wan.delay,
                wan.loss * 100.0,
                wan.rate / 1000,
                wan.queue / 1024
            ),
        }
    }
}

/// A network namespace joined to the host by a veth or a WAN; deleted (with everything in
/// it) on drop.
#[derive(Debug)]
pub struct Link {
    /// The namespace's name (`/run/netns/NAME`).
    pub name: String,
    /// The index `N` of `198.18.N.0/30` and `198.19.N.0/24`.
    pub index: u8,
    /// The host's end of the link.
    pub host_if: String,
    /// The node's end of the link, inside the namespace.
    pub node_if: String,
    cut: bool,
    wan: Option<Forwarder>,
}

impl Link {
    /// Creates the namespace and a veth, addresses them and routes the node's traffic to
    /// the host.
    pub fn create() -> Result<Link> {
        Link::create_as(&LinkKind::Lan)
    }

    /// Creates the namespace and a link of `kind`, addresses them and routes the node's
    /// traffic to the host.
    pub fn create_as(kind: &LinkKind) -> Result<Link> {
        crate::sweep::sweep_once();
        // Tests run side by side: two links picking the same free index at once would take
        // each other's names. Held until the link has its addresses.
        static CREATING: Mutex<()> = Mutex::new(());
        let _one_at_a_time = CREATING.lock().unwrap_or_else(PoisonError::into_inner);
        let used = run(Command::new("ip").args(["-4", "-o", "addr", "show"]))?;
        let index = (1..=127u8)
            .find(|n| !used.contains(&format!(" 198.18.{n}.")))
            .context("no free 198.18.N.0/30 for a node link")?;
        let mut link = Link {
            // The owner's pid, for the sweep after a harness killed outright.
            name: format!(
                "{}{index}-{}",
                crate::sweep::NETNS_PREFIX,
                std::process::id()
            ),
            index,
            host_if: format!("egc{index}"),
            node_if: format!("egn{index}"),
            cut: false,
            wan: None,
        };
        // A host end left without its address (its namespace swept) would block the name.
        let _ = Command::new("ip")
            .args(["link", "del", &link.host_if])
            .output();
        run(Command::new("ip").args(["netns", "add", &link.name]))?;
        // From here a failure drops `link`, which removes the namespace.
        match kind {
            LinkKind::Lan => {
                run(Command::new("ip").args([
                    "link",
                    "add",
                    &link.host_if,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &link.node_if,
                    "netns",
                    &link.name,
                ]))?;
            }
            LinkKind::Wan(wan) => {
                let host = tun_device(&link.host_if)?;
                // Made here, bound to this process, then moved into the namespace.
                let node = tun_device(&link.node_if)?;
                run(Command::new("ip").args(["link", "set", &link.node_if, "netns", &link.name]))?;
                link.wan = Some(Forwarder::start(wan, host, node)?);
            }
        }
        let host_cidr = format!("{}/30", link.host_ip());
        run(Command::new("ip").args(["addr", "add", &host_cidr, "dev", &link.host_if]))?;
        run(Command::new("ip").args(["link", "set", &link.host_if, "up"]))?;
        let node_cidr = format!("{}/30", link.node_ip());
        link.ip(&["link", "set", "lo", "up"])?;
        link.ip(&["addr", "add", &node_cidr, "dev", &link.node_if])?;
        link.up()?;
        Ok(link)
    }

    /// The host's address on the link: where the cloud listens.
    pub fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, self.index, 1)
    }

    /// The node's address (its InternalIP).
    pub fn node_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, self.index, 2)
    }

    /// The node's pod range, on its CNI bridge.
    pub fn pod_cidr(&self) -> String {
        format!("198.19.{}.0/24", self.index)
    }

    /// The namespace's file, for `nsenter --net=`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// `program` run inside the namespace. `nsenter --net` rather than `ip netns exec`,
    /// which remounts `/sys` and so hides the cgroup hierarchy kubelet and runc need.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--net={}", self.path().display()))
            .arg("--")
            .arg(program);
        command
    }

    /// A tokio runtime whose threads (workers and blocking pool) are in the namespace: the
    /// sockets its tasks open are the node's. `block_on` runs on the caller's thread, in
    /// its network: only spawned tasks are the node's.
    pub fn runtime(&self) -> Result<tokio::runtime::Runtime> {
        let namespace = std::fs::File::open(self.path())
            .with_context(|| format!("opening {}", self.path().display()))?;
        Ok(tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .on_thread_start(move || {
                // A thread left in the host's network would reach the host's loopback.
                nix::sched::setns(&namespace, nix::sched::CloneFlags::CLONE_NEWNET)
                    .expect("a thread can join the node's network namespace");
            })
            .build()?)
    }

    /// Runs `program args` in the namespace; its stdout, or its stderr as the error.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String> {
        run(self.command(program).args(args))
    }

    /// Cuts the link: the node's end goes down.
    pub fn cut(&mut self) -> Result<()> {
        self.ip(&["link", "set", &self.node_if, "down"])?;
        self.cut = true;
        Ok(())
    }

    /// Restores the link (and the node's default route, which went with it).
    pub fn restore(&mut self) -> Result<()> {
        self.up()?;
        self.cut = false;
        Ok(())
    }

    /// Whether the link is cut.
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// The WAN emulator, if the link is a WAN.
    pub fn wan(&self) -> Option<&Forwarder> {
        self.wan.as_ref()
    }

    fn up(&self) -> Result<()> {
        self.ip(&["link", "set", &self.node_if, "up"])?;
        let gateway = self.host_ip().to_string();
        self.ip(&["route", "replace", "default", "via", &gateway])?;
        Ok(())
    }

    fn ip(&self, args: &[&str]) -> Result<()> {
        self.run("ip", args).map(drop)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // The WAN's threads stop and its devices go with their descriptors.
        drop(self.wan.take());
        // Deleting the namespace deletes the node's end of the veth, and with it the host's.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .output();
    }
}

/// Runs `command`; its stdout, or a failure naming it with its stderr.
pub(crate) fn run(command: &mut Command) -> Result<String> {
    let output = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
