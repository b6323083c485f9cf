//! Clients of the cluster through the gateway's own proxy, as component `edgegate`.

use std::net::SocketAddr;

/// A client of the cluster through the gateway's proxy at `proxy`, as component `edgegate`
/// (`edgegate/VERSION PURPOSE`).
pub(crate) fn client_through(
    proxy: SocketAddr,
    purpose: &str,
) -> Result<kube::Client, kube::Error> {
    kube::Client::try_from(config_through(proxy, purpose)?)
}

/// The configuration of [`client_through`].
pub(crate) fn config_through(
    proxy: SocketAddr,
    purpose: &str,
) -> Result<kube::Config, kube::Error> {
    let host = if proxy.ip().is_unspecified() {
        SocketAddr::from(([127, 0, 0, 1], proxy.port()))
    } else {
        proxy
    };
    let uri: http::Uri = format!("http://{host}")
        .parse()
        .map_err(|e: http::uri::InvalidUri| kube::Error::Service(Box::new(e)))?;
    let mut config = kube::Config::new(uri);
    // Plain HTTP on loopback: no roots to trust (else the system's are loaded, and a node's
    // image may have none).
    config.root_cert = Some(Vec::new());
    let agent = format!("edgegate/{} {purpose}", env!("CARGO_PKG_VERSION"));
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(&agent).map_err(|e| kube::Error::Service(Box::new(e)))?,
    ));
    Ok(config)
}
