//! A backend that answers any request by switching to a private protocol and echoing bytes:
//! the far end of the upgrade-tunnel test. It stands where a kubelet's exec endpoint would.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The running echo backend.
pub struct Echo {
    addr: SocketAddr,
    upgrades: Arc<AtomicUsize>,
}

impl Echo {
    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// How many requests it switched.
    pub fn upgrades(&self) -> usize {
        self.upgrades.load(Ordering::SeqCst)
    }
}

/// This host's first non-loopback IPv4 address: kube-apiserver refuses to proxy to loopback.
pub fn host_ip() -> Result<IpAddr> {
    let out = std::process::Command::new("hostname").arg("-I").output()?;
    String::from_utf8(out.stdout)?
        .split_whitespace()
        .filter_map(|a| a.parse::<IpAddr>().ok())
        .find(|a| a.is_ipv4() && !a.is_loopback())
        .context("this host has no non-loopback IPv4 address for the apiserver to proxy to")
}

/// Starts the backend on `ip`, port chosen by the system.
pub async fn start(ip: IpAddr) -> Result<Echo> {
    let listener = TcpListener::bind((ip, 0)).await?;
    let addr = listener.local_addr()?;
    let upgrades = Arc::new(AtomicUsize::new(0));
    let counter = upgrades.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read_exact(&mut byte).await.is_err() {
                        return;
                    }
                    head.push(byte[0]);
                }
                // Only a request that still asks for our protocol is switched.
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                if !head.contains("\r\nupgrade: edgegate-echo\r\n") {
                    let _ = stream
                        .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                        .await;
                    return;
                }
                let reply = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: edgegate-echo\r\n\r\n";
                if stream.write_all(reply).await.is_err() {
                    return;
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let (mut reader, mut writer) = stream.split();
                let _ = tokio::io::copy(&mut reader, &mut writer).await;
            });
        }
    });
    Ok(Echo { addr, upgrades })
}
