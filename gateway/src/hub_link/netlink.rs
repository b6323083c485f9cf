//! The few rtnetlink exchanges the hub interface needs, over one request socket: find a
//! link by name, create a link, set a link up, add an address. Each request asks for
//! an acknowledgement, so every answer ends with the kernel's verdict.

use std::io;
use std::net::IpAddr;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage,
    NetlinkPayload,
};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_sys::protocols::NETLINK_ROUTE;
use netlink_sys::{Socket, SocketAddr};

/// The largest answer the requests here get: one link or an acknowledgement.
const RECEIVE_BUFFER: usize = 64 * 1024;

/// A route netlink socket for requests, bound in the network namespace of the thread that
/// opened it.
pub(super) struct Route {
    socket: Socket,
    sequence: u32,
}

impl Route {
    /// Opens the socket.
    pub(super) fn open() -> io::Result<Route> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(Route {
            socket,
            sequence: 0,
        })
    }

    /// The index of the link named `name`, if there is one.
    pub(super) fn link_index(&mut self, name: &str) -> io::Result<Option<u32>> {
        let mut message = LinkMessage::default();
        message
            .attributes
            .push(LinkAttribute::IfName(name.to_owned()));
        match self.request(RouteNetlinkMessage::GetLink(message), 0) {
            Ok(answers) => Ok(answers.into_iter().find_map(|answer| match answer {
                RouteNetlinkMessage::NewLink(link) => Some(link.header.index),
                _ => None,
            })),
            Err(error) if error.raw_os_error() == Some(libc_errno::ENODEV) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Creates a link of `kind` named `name`, up; false if a link of that name exists.
    pub(super) fn add_link(&mut self, name: &str, kind: InfoKind) -> io::Result<bool> {
        let mut message = LinkMessage::default();
        message.header.flags = LinkFlags::Up;
        message.header.change_mask = LinkFlags::Up;
        message.attributes = vec![
            LinkAttribute::IfName(name.to_owned()),
            LinkAttribute::LinkInfo(vec![LinkInfo::Kind(kind)]),
        ];
        created(self.request(
            RouteNetlinkMessage::NewLink(message),
            NLM_F_CREATE | NLM_F_EXCL,
        ))
    }

    /// Sets link `index` up (nothing changes if it is).
    pub(super) fn set_up(&mut self, index: u32) -> io::Result<()> {
        let mut message = LinkMessage::default();
        message.header.index = index;
        message.header.flags = LinkFlags::Up;
        message.header.change_mask = LinkFlags::Up;
        self.request(RouteNetlinkMessage::SetLink(message), 0)
            .map(drop)
    }

    /// Adds `ip` as a host address (/32 or /128) of link `index`; false if it has it.
    pub(super) fn add_address(&mut self, index: u32, ip: IpAddr) -> io::Result<bool> {
        let mut message = AddressMessage::default();
        message.header.index = index;
        let (family, prefix_len) = match ip {
            IpAddr::V4(_) => (AddressFamily::Inet, 32),
            IpAddr::V6(_) => (AddressFamily::Inet6, 128),
        };
        message.header.family = family;
        message.header.prefix_len = prefix_len;
        if ip.is_ipv4() {
            message.attributes.push(AddressAttribute::Local(ip));
        }
        message.attributes.push(AddressAttribute::Address(ip));
        created(self.request(
            RouteNetlinkMessage::NewAddress(message),
            NLM_F_CREATE | NLM_F_EXCL,
        ))
    }

    /// Sends one request and collects the answers up to the kernel's acknowledgement; a
    /// refusal is its errno.
    fn request(
        &mut self,
        message: RouteNetlinkMessage,
        flags: u16,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.sequence = self.sequence.wrapping_add(1);
        let sequence = self.sequence;
        let mut packet =
            NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(message));
        packet.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        packet.header.sequence_number = sequence;
        packet.finalize();
        let mut bytes = vec![0; packet.buffer_len()];
        packet.serialize(&mut bytes);
        self.socket.send(&bytes, 0)?;

        let mut answers = Vec::new();
        let mut buffer = Vec::with_capacity(RECEIVE_BUFFER);
        loop {
            buffer.clear();
            let size = self.socket.recv(&mut buffer, 0)?;
            let mut offset = 0;
            while offset < size.min(buffer.len()) {
                let answer: NetlinkMessage<RouteNetlinkMessage> =
                    NetlinkMessage::deserialize(&buffer[offset..])
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let length = answer.header.length as usize;
                // An answer to an earlier request that was given up on.
                if answer.header.sequence_number == sequence {
                    match answer.payload {
                        NetlinkPayload::Error(error) => {
                            return match error.code {
                                None => Ok(answers),
                                Some(_) => Err(error.to_io()),
                            };
                        }
                        NetlinkPayload::Done(_) => return Ok(answers),
                        NetlinkPayload::InnerMessage(inner) => answers.push(inner),
                        _ => {}
                    }
                }
                if length == 0 {
                    break;
                }
                offset += length;
            }
        }
    }
}

/// A create's outcome: true if made, false if it was there (`EEXIST`).
fn created(result: io::Result<Vec<RouteNetlinkMessage>>) -> io::Result<bool> {
    match result {
        Ok(_) => Ok(true),
        Err(error) if error.raw_os_error() == Some(libc_errno::EEXIST) => Ok(false),
        Err(error) => Err(error),
    }
}

/// The errnos the kernel answers with here (Linux's values, the same on every
/// architecture).
pub(super) mod libc_errno {
    /// No such device.
    pub const ENODEV: i32 = 19;
    /// It exists already.
    pub const EEXIST: i32 = 17;
    /// No buffer space: a multicast listener missed messages.
    pub const ENOBUFS: i32 = 105;
    /// Not supported: a link type the kernel was built without.
    pub const EOPNOTSUPP: i32 = 95;
}
