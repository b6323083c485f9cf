//! A TCP relay between the gateway and kube-apiserver that a test can cut and restore: a
//! network partition with the apiserver still running (so the test can change the cluster
//! behind the gateway's back).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;

/// A relay listening on a loopback port and forwarding to a target.
#[derive(Debug)]
pub struct Relay {
    /// Where clients connect.
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    /// Each open connection's flag: once set, it carries nothing either way, and stays open.
    stalled: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
    live: Arc<Mutex<Vec<TcpStream>>>,
    closed: Arc<AtomicBool>,
    down: Arc<AtomicU64>,
}

impl Relay {
    /// Starts relaying `127.0.0.1:<free port>` to `target`.
    pub fn start(target: SocketAddr) -> Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let relay = Relay {
            addr,
            cut: Arc::new(AtomicBool::new(false)),
            stalled: Arc::default(),
            live: Arc::new(Mutex::new(Vec::new())),
            closed: Arc::new(AtomicBool::new(false)),
            down: Arc::new(AtomicU64::new(0)),
        };
        let (cut, live, closed) = (relay.cut.clone(), relay.live.clone(), relay.closed.clone());
        let (down, stalled) = (relay.down.clone(), relay.stalled.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if closed.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                if cut.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else {
                    continue;
                };
                if let Ok(mut live) = live.lock() {
                    live.extend(client.try_clone().ok());
                    live.extend(server.try_clone().ok());
                }
                let stall = Arc::new(AtomicBool::new(false));
                if let Ok(mut stalled) = stalled.lock() {
                    stalled.push(stall.clone());
                }
                pipe(&client, &server, None, stall.clone());
                pipe(&server, &client, Some(down.clone()), stall);
            }
        });
        Ok(relay)
    }

    /// Cuts the link: open connections are reset, new ones are closed at once.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        if let Ok(mut live) = self.live.lock() {
            for stream in live.drain(..) {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }

    /// Cuts the link as a link that goes down does: nothing resets the open connections,
    /// they just carry nothing more (YurtHub #2792's case); new ones are closed at once, as a
    /// node without a route to the cloud fails to connect.
    pub fn stall(&self) {
        self.cut.store(true, Ordering::SeqCst);
        if let Ok(mut stalled) = self.stalled.lock() {
            for stall in stalled.drain(..) {
                stall.store(true, Ordering::SeqCst);
            }
        }
    }

    /// Restores the link for new connections (stalled ones stay silent: their peers gave up).
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// Bytes the apiserver has sent through the relay so far (TLS records included): what the
    /// edge link carries down.
    pub fn bytes_down(&self) -> u64 {
        self.down.load(Ordering::SeqCst)
    }

    /// The URL the gateway should use to reach the apiserver through the relay.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        self.cut();
        // Wake the acceptor so it sees `closed`.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies `from` to `to` on a thread of its own, counting the bytes into `count`; while
/// `stalled`, what arrives is dropped.
fn pipe(from: &TcpStream, to: &TcpStream, count: Option<Arc<AtomicU64>>, stalled: Arc<AtomicBool>) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) if stalled.load(Ordering::SeqCst) => {}
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    if let Some(count) = &count {
                        count.fetch_add(n as u64, Ordering::SeqCst);
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
