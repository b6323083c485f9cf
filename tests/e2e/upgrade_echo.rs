//! A backend that answers any request by switching to a private protocol and echoing bytes:
//! the far end of the upgrade-tunnel test. It stands where a kubelet's exec endpoint would.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use edgegate_testkit::{ADMIN_TOKEN, Gateway};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::{Env, runtime, unique};

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

/// Opens an upgrade through `gateway`'s plain proxy and the apiserver's node proxy to a new
/// echo backend (behind a Node made for it, then deleted), sends each of `words` and
/// returns what came back; fails unless the backend switched exactly once.
pub fn tunnel(env: &Env, gateway: &Gateway, words: &[&'static str]) -> Result<String> {
    let host_ip = host_ip()?;
    let node = unique("echo-node");
    let words = words.to_vec();
    runtime().block_on(async {
        let echo = start(host_ip).await?;
        let port = echo.port();
        let manifest = format!(
            r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{node}"}},
                "status":{{"addresses":[{{"type":"InternalIP","address":"{host_ip}"}}]}}}}"#
        );
        let file = gateway.dir.join(format!("{node}.json"));
        std::fs::write(&file, manifest)?;
        env.cluster
            .kubectl(&["create", "-f", &file.display().to_string()])?;
        let proxy = gateway.proxy;
        let path = format!("/api/v1/nodes/http:{node}:{port}/proxy/");
        let transcript =
            tokio::task::spawn_blocking(move || exchange(proxy, &path, &words)).await??;
        ensure!(
            echo.upgrades() == 1,
            "the backend saw {} upgrades",
            echo.upgrades()
        );
        env.cluster.kubectl(&["delete", "node", &node])?;
        Ok(transcript)
    })
}

/// Asks `proxy` to switch `path` to the echo protocol on the admin's token, then sends
/// `words` one at a time, each read back before the next.
fn exchange(proxy: SocketAddr, path: &str, words: &[&str]) -> Result<String> {
    let mut stream = std::net::TcpStream::connect(proxy)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nConnection: Upgrade\r\nUpgrade: edgegate-echo\r\n\r\n"
    )?;
    let head = edgegate_testkit::http::read_head(&mut stream)?;
    if !head.starts_with("HTTP/1.1 101") {
        let mut rest = vec![0u8; 400];
        let n = stream.read(&mut rest).unwrap_or(0);
        bail!("no switch: {head}{}", String::from_utf8_lossy(&rest[..n]));
    }
    let mut echoed = String::new();
    for word in words {
        stream.write_all(word.as_bytes())?;
        let mut buf = vec![0u8; word.len()];
        stream.read_exact(&mut buf)?;
        echoed.push_str(std::str::from_utf8(&buf)?);
    }
    Ok(echoed)
}
