//! Header hygiene between client and apiserver: hop-by-hop headers stay on their hop, the
//! client's address is passed on in `X-Forwarded-For`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use smallvec::SmallVec;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Headers that describe one connection and must not be forwarded (RFC 9110 §7.6.1).
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// Whether the request asks to switch protocols (`Connection: upgrade` with `Upgrade`).
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE) && connection_has(headers, "upgrade")
}

fn connection_has(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Removes hop-by-hop headers, including those the `Connection` header names; an upgrade
/// keeps `Connection: upgrade` and `Upgrade`, which the next hop needs to switch.
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    let upgrade = keep_upgrade
        .then(|| headers.get(header::UPGRADE).cloned())
        .flatten();
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
    headers.remove(header::UPGRADE);
    if let Some(upgrade) = upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, upgrade);
    }
}

/// Appends the client's address to `X-Forwarded-For`.
pub fn add_forwarded_for(headers: &mut HeaderMap, peer: SocketAddr) {
    let name = HeaderName::from_static("x-forwarded-for");
    let value = match (headers.get(&name).and_then(|v| v.to_str().ok()), peer.ip()) {
        (Some(prior), ip) => HeaderValue::from_str(&format!("{prior}, {ip}")),
        // Every request on a node's loopback or pod network: written without `fmt`.
        (None, IpAddr::V4(ip)) => HeaderValue::from_bytes(&ipv4_text(ip)),
        (None, ip) => HeaderValue::from_str(&ip.to_string()),
    };
    if let Ok(value) = value {
        headers.insert(name, value);
    }
}

/// `ip` in dotted decimal, as `Ipv4Addr`'s `Display` writes it.
fn ipv4_text(ip: Ipv4Addr) -> SmallVec<[u8; 15]> {
    let mut text = SmallVec::new();
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            text.push(b'.');
        }
        if octet >= 100 {
            text.push(b'0' + octet / 100);
        }
        if octet >= 10 {
            text.push(b'0' + octet / 10 % 10);
        }
        text.push(b'0' + octet % 10);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn forwarded_for_names_the_client_as_display_does() {
        for ip in [
            Ipv4Addr::new(0, 0, 0, 0),
            Ipv4Addr::new(127, 0, 0, 1),
            Ipv4Addr::new(10, 99, 100, 255),
            Ipv4Addr::new(198, 18, 9, 90),
        ] {
            assert_eq!(ipv4_text(ip).as_slice(), ip.to_string().as_bytes());
        }
        let mut h = HeaderMap::new();
        add_forwarded_for(&mut h, "198.18.0.7:4242".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "198.18.0.7");
        add_forwarded_for(&mut h, "[2001:db8::1]:443".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "198.18.0.7, 2001:db8::1");
        let mut h = HeaderMap::new();
        add_forwarded_for(&mut h, "[2001:db8::2]:443".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "2001:db8::2");
    }

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_removed() {
        let mut h = headers(&[
            ("connection", "keep-alive, x-trace"),
            ("keep-alive", "timeout=5"),
            ("x-trace", "1"),
            ("transfer-encoding", "chunked"),
            ("accept", "application/json"),
            ("upgrade", "h2c"),
        ]);
        strip_hop_by_hop(&mut h, false);
        assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["accept"]);
    }

    #[test]
    fn an_upgrade_keeps_what_the_next_hop_needs() {
        let mut h = headers(&[
            ("connection", "Upgrade"),
            ("upgrade", "SPDY/3.1"),
            ("x-stream-protocol-version", "v4.channel.k8s.io"),
        ]);
        assert!(is_upgrade(&h));
        strip_hop_by_hop(&mut h, true);
        assert_eq!(h["connection"], "upgrade");
        assert_eq!(h["upgrade"], "SPDY/3.1");
        assert_eq!(h["x-stream-protocol-version"], "v4.channel.k8s.io");
    }

    #[test]
    fn forwarded_for_is_appended() {
        let mut h = headers(&[("x-forwarded-for", "10.0.0.9")]);
        add_forwarded_for(&mut h, "127.0.0.1:5000".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "10.0.0.9, 127.0.0.1");
    }
}
