//! The hub interface's name and address as the configuration checks them: plain values.

use std::net::{IpAddr, Ipv4Addr};

/// YurtHub's default address of the link.
pub const DEFAULT_IP: Ipv4Addr = Ipv4Addr::new(169, 254, 2, 1);

/// Whether `name` and `ip` are what YurtHub accepts: a link name of 1–15 bytes without
/// `/` or whitespace; an IPv6 address, or an IPv4 one in `169.254.0.0/16` outside
/// `169.254.31.0/24` and other than `169.254.1.1` (which OpenYurt's other agents use).
pub fn check(name: &str, ip: IpAddr) -> Result<(), String> {
    if name.is_empty() || name.len() > 15 || name.contains(['/', ' ', '\t', '\n']) {
        return Err(format!(
            "the hub interface's name {name:?} must be 1 to 15 bytes, without '/' or spaces"
        ));
    }
    if let IpAddr::V4(v4) = ip {
        let [a, b, c, d] = v4.octets();
        if (a, b) != (169, 254) {
            return Err(format!(
                "the hub interface's address {ip} is not in 169.254.0.0/16"
            ));
        }
        if c == 31 || (c, d) == (1, 1) {
            return Err(format!(
                "the hub interface's address {ip} is reserved (169.254.31.0/24, 169.254.1.1)"
            ));
        }
    }
    Ok(())
}
