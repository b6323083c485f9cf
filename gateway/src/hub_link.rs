//! The hub interface (YurtHub's dummy interface): a dummy link holding one host address,
//! `169.254.2.1` by default, where pods reach the gateway's HTTPS proxy. Made through
//! rtnetlink, never by running `ip`; an existing link or address is taken as it is; a
//! deletion of either (or the link set down) is seen on the kernel's link and address
//! events and undone at once; the link is left in place when the gateway exits, as YurtHub
//! leaves it, so pods keep a route to the address across a restart.
//!
//! A kernel built without dummy links (`CONFIG_DUMMY`; "Operation not supported") gets a
//! bridge without ports instead, which holds a local address just as well: packets to a
//! local address never reach the link itself.

pub(crate) mod address;
mod netlink;

use std::io;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::address::AddressAttribute;
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags};
use netlink_sys::protocols::NETLINK_ROUTE;
use netlink_sys::{Socket, SocketAddr};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use thiserror::Error;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use self::netlink::{Route, libc_errno};

/// rtnetlink's multicast groups of link changes and of IPv4 and IPv6 address changes.
const LINK_EVENTS: [u32; 3] = [1, 5, 9];

/// Why the hub interface could not be made or kept.
#[derive(Debug, Error)]
pub enum InterfaceError {
    /// A netlink request failed (without `CAP_NET_ADMIN`: "Operation not permitted").
    #[error("cannot {what} the hub interface {name}")]
    Netlink {
        /// What was being done.
        what: &'static str,
        /// The link's name.
        name: String,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },
}

/// What [`HubInterface::ensure`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ensured {
    /// The link was made (it was not there).
    pub link_created: bool,
    /// The address was added (the link did not have it).
    pub address_added: bool,
}

/// Counters of the hub interface.
#[derive(Clone, Debug, Default)]
struct InterfaceMetrics {
    repairs: Counter,
    failures: Counter,
}

/// The hub interface of this network namespace, and the sockets that make and watch it.
pub struct HubInterface {
    link: Link,
    events: Socket,
}

/// The link and address kept, and the socket that makes them.
struct Link {
    name: String,
    ip: IpAddr,
    route: Mutex<Route>,
    metrics: InterfaceMetrics,
    /// The kernel has no dummy links: a bridge stands in.
    no_dummy: AtomicBool,
}

impl std::fmt::Debug for HubInterface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubInterface")
            .field("name", &self.link.name)
            .field("ip", &self.link.ip)
            .finish_non_exhaustive()
    }
}

impl HubInterface {
    /// Opens the netlink sockets, in the network namespace of the calling thread: one for
    /// requests, one subscribed to link and address events (before anything is made, so no
    /// deletion after [`HubInterface::ensure`] goes unseen).
    pub fn open(name: &str, ip: IpAddr) -> Result<HubInterface, InterfaceError> {
        let failed = |what| {
            let name = name.to_owned();
            move |source| InterfaceError::Netlink { what, name, source }
        };
        let mut events = Socket::new(NETLINK_ROUTE).map_err(failed("watch"))?;
        events
            .bind(&SocketAddr::new(0, 0))
            .map_err(failed("watch"))?;
        for group in LINK_EVENTS {
            events.add_membership(group).map_err(failed("watch"))?;
        }
        // Lost events are told by ENOBUFS, after which the link is checked anyway.
        events.set_non_blocking(true).map_err(failed("watch"))?;
        let link = Link {
            name: name.to_owned(),
            ip,
            route: Mutex::new(Route::open().map_err(failed("open netlink for"))?),
            metrics: InterfaceMetrics::default(),
            no_dummy: AtomicBool::new(false),
        };
        Ok(HubInterface { link, events })
    }

    /// The link's address.
    pub fn ip(&self) -> IpAddr {
        self.link.ip
    }

    /// Registers `edgegate_hub_interface_{repairs,failures}_total`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "edgegate_hub_interface_repairs",
            "Times the hub interface's link or address was found gone (or the link down) and made again",
            self.link.metrics.repairs.clone(),
        );
        registry.register(
            "edgegate_hub_interface_failures",
            "Times the hub interface could not be made or checked (e.g. without CAP_NET_ADMIN)",
            self.link.metrics.failures.clone(),
        );
    }

    /// Makes the link (a dummy, up) and its address, taking what is there as it is.
    pub fn ensure(&self) -> Result<Ensured, InterfaceError> {
        self.link.ensure()
    }

    /// Keeps the link and its address for as long as the future runs: every deletion of
    /// either, and the link set down, is undone, logged and counted. Dropping the future
    /// leaves the link in place.
    pub async fn keep(self) {
        let HubInterface { link, events } = self;
        // SAFETY: the socket owns its descriptor, is moved into the AsyncFd and closes the
        // descriptor only when dropped with it; its `as_raw_fd` always returns that one.
        #[allow(unsafe_code)]
        let registered = unsafe { AsyncFd::register_with_interest(events, Interest::READABLE) };
        let Ok(events) = registered else {
            tracing::error!(name = %link.name, "cannot watch the hub interface: it is not kept");
            link.metrics.failures.inc();
            return;
        };
        let mut buffer = Vec::with_capacity(64 * 1024);
        loop {
            let Ok(mut ready) = events.readable().await else {
                return;
            };
            buffer.clear();
            let repair = match ready.try_io(|socket| socket.get_ref().recv(&mut buffer, 0)) {
                Err(_would_block) => continue,
                Ok(Ok(size)) => {
                    needs_repair(&buffer[..size.min(buffer.len())], &link.name, link.ip)
                }
                Ok(Err(error)) if error.raw_os_error() == Some(libc_errno::ENOBUFS) => true,
                Ok(Err(error)) => {
                    tracing::warn!(%error, "reading link events failed");
                    false
                }
            };
            if repair {
                link.repair();
            }
        }
    }
}

impl Link {
    fn ensure(&self) -> Result<Ensured, InterfaceError> {
        let result = self.try_ensure();
        if result.is_err() {
            self.metrics.failures.inc();
        }
        result
    }

    fn try_ensure(&self) -> Result<Ensured, InterfaceError> {
        let failed = |what| {
            move |source| InterfaceError::Netlink {
                what,
                name: self.name.clone(),
                source,
            }
        };
        let mut route = self.route.lock().unwrap_or_else(|p| p.into_inner());
        let made = if self.no_dummy.load(Ordering::Relaxed) {
            route.add_link(&self.name, InfoKind::Bridge)
        } else {
            match route.add_link(&self.name, InfoKind::Dummy) {
                Err(error) if error.raw_os_error() == Some(libc_errno::EOPNOTSUPP) => {
                    tracing::warn!(
                        name = %self.name,
                        "this kernel has no dummy links (CONFIG_DUMMY): the hub interface is a \
                         bridge without ports, which holds the address the same way"
                    );
                    self.no_dummy.store(true, Ordering::Relaxed);
                    route.add_link(&self.name, InfoKind::Bridge)
                }
                made => made,
            }
        };
        let link_created = made.map_err(failed("create"))?;
        let index = route
            .link_index(&self.name)
            .map_err(failed("find"))?
            .ok_or_else(|| failed("find")(io::Error::from_raw_os_error(libc_errno::ENODEV)))?;
        if !link_created {
            route.set_up(index).map_err(failed("set up"))?;
        }
        let address_added = route
            .add_address(index, self.ip)
            .map_err(failed("address"))?;
        Ok(Ensured {
            link_created,
            address_added,
        })
    }

    fn repair(&self) {
        match self.ensure() {
            Ok(ensured) if ensured.link_created || ensured.address_added => {
                self.metrics.repairs.inc();
                tracing::warn!(
                    name = %self.name, ip = %self.ip, link_made = ensured.link_created,
                    "the hub interface was removed: made again"
                );
            }
            Ok(_) => {}
            Err(error) => tracing::error!(
                error = %crate::error::error_chain(&error),
                "the hub interface was removed and cannot be made again; pods cannot reach the gateway"
            ),
        }
    }
}

/// Whether a batch of link and address events removes the link named `name` or its
/// address `ip`, or sets that link down.
fn needs_repair(mut bytes: &[u8], name: &str, ip: IpAddr) -> bool {
    let mut repair = false;
    while !bytes.is_empty() {
        let Ok(message) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes) else {
            // Unreadable: look at the link anyway.
            return true;
        };
        let length = (message.header.length as usize).max(1).min(bytes.len());
        bytes = &bytes[length..];
        let NetlinkPayload::InnerMessage(event) = message.payload else {
            continue;
        };
        let named = |attributes: &[LinkAttribute]| {
            attributes
                .iter()
                .any(|a| matches!(a, LinkAttribute::IfName(n) if n == name))
        };
        repair |= match event {
            RouteNetlinkMessage::DelLink(link) => named(&link.attributes),
            RouteNetlinkMessage::NewLink(link) => {
                named(&link.attributes) && !link.header.flags.contains(LinkFlags::Up)
            }
            RouteNetlinkMessage::DelAddress(address) => address.attributes.iter().any(|a| {
                matches!(a, AddressAttribute::Address(at) | AddressAttribute::Local(at) if *at == ip)
            }),
            _ => false,
        };
    }
    repair
}

#[cfg(test)]
mod tests;
