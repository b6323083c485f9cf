//! The listeners the gateway serves on, bound before it starts (tests bind port 0 to learn
//! the ports): the proxy, the HTTPS proxy (with the hub interface it also listens on), the
//! hub server and the pool port.

use std::net::SocketAddr;

use tokio::net::TcpListener;

use super::identity::Identity;
use super::start_error::ServerError;
use crate::config::Config;
use crate::hub_link::HubInterface;

/// The bound listeners; bind them first to learn the ports (tests bind port 0).
pub struct Listeners {
    pub(super) proxy: TcpListener,
    /// The HTTPS proxy, when served: on --bind-proxy-address, and on the hub interface's
    /// address when it was made.
    pub(super) secure: Vec<(TcpListener, tokio_rustls::TlsAcceptor)>,
    pub(super) hub: TcpListener,
    /// The pool port, when served (--node-ip).
    pub(super) pool: Option<(TcpListener, tokio_rustls::TlsAcceptor)>,
    /// The hub interface, to be kept while the gateway runs (when it was made).
    pub(super) hub_interface: Option<HubInterface>,
}

/// Connections the kernel completes and queues before the gateway accepts them: as many as
/// `somaxconn` allows (4 096 by default), as Go's listeners ask, so that the components of a
/// node reconnecting at once (a restart, a link back) are queued, not made to retry their
/// SYNs for seconds. tokio's default is 1 024.
const BACKLOG: u32 = 4096;

/// A listener on `addr`, with [`BACKLOG`] and `SO_REUSEADDR` (a restart rebinds while the
/// old connections linger in TIME_WAIT).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

impl Listeners {
    /// Binds the addresses of `config`: the HTTPS proxy's and the pool port's when
    /// `identity` has the TLS they serve with.
    pub async fn bind(config: &Config, identity: &Identity) -> Result<Listeners, ServerError> {
        let bind = |addr: SocketAddr| async move {
            listen(addr).map_err(|source| ServerError::Bind { addr, source })
        };
        let mut secure = Vec::new();
        let mut hub_interface = None;
        if let Some(tls) = &identity.secure_proxy {
            let addr = config.secure_proxy_addr;
            let tls = tokio_rustls::TlsAcceptor::from(tls.clone());
            secure.push((bind(addr).await?, tls.clone()));
            hub_interface = make_hub_interface(config);
            if let Some(made) = &hub_interface
                // A wildcard --bind-proxy-address already covers the hub's address.
                && !addr.ip().is_unspecified()
                && addr.ip() != made.ip()
            {
                let on_hub = SocketAddr::new(made.ip(), addr.port());
                secure.push((bind(on_hub).await?, tls));
            }
        } else if let Some(settings) = &config.hub_interface {
            tracing::info!(
                name = %settings.name,
                "no hub interface: the HTTPS proxy is not served (no --tls-cert-file)"
            );
        }
        let pool = match (config.pool_port, &identity.pool_port) {
            (Some(addr), Some(tls)) => Some((bind(addr).await?, tls.clone().into())),
            _ => None,
        };
        Ok(Listeners {
            proxy: bind(config.proxy_addr).await?,
            secure,
            hub: bind(config.hub_addr).await?,
            pool,
            hub_interface,
        })
    }

    /// The address the proxy listens on.
    pub fn proxy_addr(&self) -> std::io::Result<SocketAddr> {
        self.proxy.local_addr()
    }

    /// The address the HTTPS proxy listens on (on --bind-proxy-address), when it is served.
    pub fn secure_proxy_addr(&self) -> Option<std::io::Result<SocketAddr>> {
        self.secure
            .first()
            .map(|(listener, _)| listener.local_addr())
    }

    /// The address the hub server listens on.
    pub fn hub_addr(&self) -> std::io::Result<SocketAddr> {
        self.hub.local_addr()
    }
}

/// Makes the hub interface of `config`, if asked for; a failure (no `CAP_NET_ADMIN`) is
/// logged and leaves the HTTPS proxy on --bind-proxy-address alone.
fn make_hub_interface(config: &Config) -> Option<HubInterface> {
    let settings = config.hub_interface.as_ref()?;
    let made = HubInterface::open(&settings.name, settings.ip).and_then(|hub| {
        let ensured = hub.ensure();
        ensured.map(|ensured| (hub, ensured))
    });
    match made {
        Ok((hub, ensured)) => {
            tracing::info!(
                name = %settings.name, ip = %settings.ip,
                made = ensured.link_created, address_added = ensured.address_added,
                "hub interface ready"
            );
            Some(hub)
        }
        Err(error) => {
            tracing::error!(
                error = %crate::error::error_chain(&error),
                "no hub interface (it needs CAP_NET_ADMIN): pods cannot reach the gateway at \
                 its address; the HTTPS proxy serves on --bind-proxy-address only"
            );
            None
        }
    }
}
