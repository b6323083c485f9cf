//! A TCP relay between the gateway and kube-apiserver that a test can cut and restore: a
//! network partition with the apiserver still running (so the test can change the cluster
//! behind the gateway's back).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;

/// A relay listening on a loopback port and forwarding to a target.
#[derive(Debug)]
pub struct Relay {
    /// Where clients connect.
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<TcpStream>>>,
    closed: Arc<AtomicBool>,
}

impl Relay {
    /// Starts relaying `127.0.0.1:<free port>` to `target`.
    pub fn start(target: SocketAddr) -> Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let relay = Relay {
            addr,
            cut: Arc::new(AtomicBool::new(false)),
            live: Arc::new(Mutex::new(Vec::new())),
            closed: Arc::new(AtomicBool::new(false)),
        };
        let (cut, live, closed) = (relay.cut.clone(), relay.live.clone(), relay.closed.clone());
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
                pipe(&client, &server);
                pipe(&server, &client);
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

    /// Restores the link.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
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

fn pipe(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
