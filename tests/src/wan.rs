//! A WAN between the host and a node's namespace, emulated packet by packet: a TUN device at
//! each end and a forwarder that carries every IP packet across with a one-way delay, random
//! loss and a rate limit with a bounded queue (tail drop, like tbf's `limit`).
//!
//! Not `tc netem`: the kernels of these machines and CI's have no `sch_netem` (nor `sch_fq`
//! or `act_bpf`). Not a TCP relay either, which would end TCP at each side and hide the loss
//! from the node's connections: here a lost segment is lost to the kernels at both ends,
//! which retransmit it as they would over a real WAN.
//!
//! Both devices are opened by this process and bound to its descriptors (not persistent):
//! the node's is created on the host and moved into the node's namespace, and both vanish
//! when the [`Forwarder`] is dropped or the process dies, however it dies.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// What the WAN does to each direction's packets.
#[derive(Clone, Debug, PartialEq)]
pub struct Wan {
    /// One-way delay, after the packet has left the rate limiter.
    pub delay: Duration,
    /// Probability that a packet is lost, in `0.0..=1.0`.
    pub loss: f64,
    /// The link's rate, in bits per second (packets are serialised at it one after another).
    pub rate: u64,
    /// Bytes that may wait for the rate limiter; a packet that does not fit is dropped.
    pub queue: usize,
    /// Seed of the loss draws (each direction derives its own), so a run can be repeated.
    pub seed: u64,
}

impl Default for Wan {
    /// Issue 34's WAN: 150 ms RTT (75 ms each way), 1 % loss, 5 Mbit/s, and a 64 KiB queue
    /// (about 100 ms at that rate).
    fn default() -> Wan {
        Wan {
            delay: Duration::from_millis(75),
            loss: 0.01,
            rate: 5_000_000,
            queue: 64 * 1024,
            seed: 0x5eed_ed6e_9a7e,
        }
    }
}

/// What the shaper does with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Delivered at this instant.
    Deliver(Instant),
    /// Lost at random.
    Lost,
    /// Dropped: the queue before the rate limiter is full.
    Overflow,
}

/// One direction's loss, rate limiter and delay, without I/O: given when a packet arrives
/// and its size, when it leaves the far end, if it does.
#[derive(Debug)]
pub struct Shaper {
    wan: Wan,
    /// When the rate limiter has serialised everything admitted so far.
    busy_until: Option<Instant>,
    rng: u64,
}

impl Shaper {
    /// A shaper for `wan`, its loss draws seeded with `seed`.
    pub fn new(wan: &Wan, seed: u64) -> Shaper {
        Shaper {
            wan: wan.clone(),
            busy_until: None,
            rng: seed,
        }
    }

    /// The fate of a packet of `len` bytes arriving at `now` (not before any earlier one).
    pub fn admit(&mut self, now: Instant, len: usize) -> Verdict {
        if self.draw() < self.wan.loss {
            return Verdict::Lost;
        }
        let start = self.busy_until.map_or(now, |busy| busy.max(now));
        // What waits ahead of this packet, in bytes: the time the limiter still needs for it.
        let waiting = (start - now).as_nanos() * u128::from(self.wan.rate) / 8 / 1_000_000_000;
        if waiting + len as u128 > self.wan.queue as u128 {
            return Verdict::Overflow;
        }
        let nanos = len as u128 * 8 * 1_000_000_000 / u128::from(self.wan.rate.max(1));
        let done = start + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        self.busy_until = Some(done);
        Verdict::Deliver(done + self.wan.delay)
    }

    /// A uniform draw in `0.0..1.0` (splitmix64: small, and enough for a loss rate).
    fn draw(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Packets counted by a forwarder, both directions together.
#[derive(Debug, Default)]
pub struct Stats {
    /// Written to the far end's device.
    pub forwarded: AtomicU64,
    /// Lost at random.
    pub lost: AtomicU64,
    /// Dropped by a full queue.
    pub overflowed: AtomicU64,
    /// Refused by the far end's device (it is down: the link is cut).
    pub refused: AtomicU64,
}

/// Packets in flight (queued or delayed) per direction at most: a hard bound on memory
/// (this many packets of at most the MTU) whatever the [`Wan`] says.
const IN_FLIGHT: usize = 4096;

/// How often a reader with nothing to read looks whether it should stop.
const POLL: Duration = Duration::from_millis(50);

/// Creates a TUN device `name` on the host, bound to the returned handle (it goes with it).
pub fn tun_device(name: &str) -> Result<tun::Device> {
    let mut config = tun::Configuration::default();
    config.tun_name(name).layer(tun::Layer::L3);
    // Addresses and state are set with `ip`, once the device is where it belongs.
    config.platform_config(|p| {
        p.ensure_root_privileges(false);
    });
    tun::create(&config).with_context(|| format!("creating the TUN device {name}"))
}

/// The forwarder between two TUN devices: two threads a direction (one reads and shapes,
/// one delivers when due); all stopped and joined on drop.
#[derive(Debug)]
pub struct Forwarder {
    stop: Arc<AtomicBool>,
    stats: Arc<Stats>,
    threads: Vec<JoinHandle<()>>,
}

impl Forwarder {
    /// Starts carrying packets between `host` and `node` as `wan` says.
    pub fn start(wan: &Wan, host: tun::Device, node: tun::Device) -> Result<Forwarder> {
        let mut forwarder = Forwarder {
            stop: Arc::new(AtomicBool::new(false)),
            stats: Arc::new(Stats::default()),
            threads: Vec::new(),
        };
        let (host_reader, host_writer) = host.split();
        let (node_reader, node_writer) = node.split();
        forwarder.direction("up", Shaper::new(wan, wan.seed), node_reader, host_writer)?;
        let down = Shaper::new(wan, wan.seed ^ 0xd0d0);
        forwarder.direction("down", down, host_reader, node_writer)?;
        Ok(forwarder)
    }

    /// What went through so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    fn direction(
        &mut self,
        name: &str,
        shaper: Shaper,
        from: tun::Reader,
        to: tun::Writer,
    ) -> Result<()> {
        let (tx, rx) = mpsc::sync_channel(IN_FLIGHT);
        let (stop, stats) = (self.stop.clone(), self.stats.clone());
        let reader = std::thread::Builder::new()
            .name(format!("wan-{name}-in"))
            .spawn(move || read(from, shaper, tx, &stop, &stats))?;
        self.threads.push(reader);
        let (stop, stats) = (self.stop.clone(), self.stats.clone());
        let writer = std::thread::Builder::new()
            .name(format!("wan-{name}-out"))
            .spawn(move || deliver(to, rx, &stop, &stats))?;
        self.threads.push(writer);
        Ok(())
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Reads packets, shapes them and hands on those to deliver, until told to stop.
fn read(
    from: tun::Reader,
    mut shaper: Shaper,
    to: SyncSender<(Instant, Vec<u8>)>,
    stop: &AtomicBool,
    stats: &Stats,
) {
    let mut buffer = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let len = match from.recv_timeout(&mut buffer, POLL) {
            Ok(len) => len,
            Err(_) => {
                // Nothing to read (a timeout), or the device is going away with the link:
                // either way, look again after a pause rather than spin.
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
        };
        match shaper.admit(Instant::now(), len) {
            Verdict::Deliver(at) => match to.try_send((at, buffer[..len].to_vec())) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    stats.overflowed.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => return,
            },
            Verdict::Lost => {
                stats.lost.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::Overflow => {
                stats.overflowed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Writes each packet to the far end when it is due, in order; ends with its reader.
fn deliver(
    mut to: tun::Writer,
    packets: Receiver<(Instant, Vec<u8>)>,
    stop: &AtomicBool,
    stats: &Stats,
) {
    while let Ok((at, packet)) = packets.recv() {
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        // A TUN device takes a packet whole or not at all.
        match to.write(&packet) {
            Ok(n) if n == packet.len() => stats.forwarded.fetch_add(1, Ordering::Relaxed),
            _ => stats.refused.fetch_add(1, Ordering::Relaxed),
        };
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
    use std::path::PathBuf;
    use std::process::Command;

    use super::*;
    use crate::netns::{Link, LinkKind};

    fn wan(delay_ms: u64, loss: f64, rate: u64, queue: usize) -> Wan {
        Wan {
            delay: Duration::from_millis(delay_ms),
            loss,
            rate,
            queue,
            seed: 7,
        }
    }

    const US: Duration = Duration::from_micros(1);

    /// The size of a datagram of the burst, and the first byte of the one that ends it.
    const DATAGRAM: usize = 1000;
    const END: u8 = 0xff;

    #[test]
    fn packets_leave_one_after_another_at_the_rate_then_the_delay() {
        // 8 Mbit/s: a byte a microsecond.
        let mut shaper = Shaper::new(&wan(75, 0.0, 8_000_000, 10_000), 1);
        let t0 = Instant::now();
        let delay = Duration::from_millis(75);
        assert_eq!(
            shaper.admit(t0, 1000),
            Verdict::Deliver(t0 + 1000 * US + delay)
        );
        assert_eq!(
            shaper.admit(t0, 500),
            Verdict::Deliver(t0 + 1500 * US + delay)
        );
        // An idle link starts again from the packet's arrival.
        let later = t0 + Duration::from_millis(10);
        assert_eq!(
            shaper.admit(later, 100),
            Verdict::Deliver(later + 100 * US + delay)
        );
    }

    #[test]
    fn a_full_queue_drops_at_its_tail() {
        let mut shaper = Shaper::new(&wan(75, 0.0, 8_000_000, 3000), 1);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(matches!(shaper.admit(t0, 1000), Verdict::Deliver(_)));
        }
        assert_eq!(shaper.admit(t0, 1000), Verdict::Overflow);
        // Once the first has left, there is room for one more, behind the other two.
        let t1 = t0 + 1000 * US;
        let delay = Duration::from_millis(75);
        assert_eq!(
            shaper.admit(t1, 1000),
            Verdict::Deliver(t0 + 4000 * US + delay)
        );
        assert_eq!(shaper.admit(t1, 1), Verdict::Overflow);
    }

    #[test]
    fn packets_are_lost_at_the_rate_asked() {
        let count = |loss: f64| {
            let mut shaper = Shaper::new(&wan(0, loss, u64::MAX / 1_000_000_000, 1 << 30), 42);
            let t0 = Instant::now();
            (0..100_000u32)
                .filter(|i| shaper.admit(t0 + *i * US, 100) == Verdict::Lost)
                .count()
        };
        assert_eq!(count(0.0), 0);
        assert_eq!(count(1.0), 100_000);
        let lost = count(0.01);
        assert!((800..1200).contains(&lost), "{lost} of 100 000 lost at 1 %");
    }

    /// Runs `f` on a thread inside `link`'s namespace: its sockets are the node's.
    fn in_node<T: Send + 'static>(
        link: &Link,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<T> {
        let path: PathBuf = link.path();
        std::thread::spawn(move || {
            let ns = std::fs::File::open(path).expect("the namespace's file");
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
    }

    #[test]
    fn a_wan_link_delays_loses_limits_and_cuts() {
        let wan = wan(20, 0.05, 5_000_000, 64 * 1024);
        let mut link = Link::create_as(&LinkKind::Wan(wan.clone())).expect("a WAN link");
        let node_ip = link.node_ip();

        // The node listens; the host sends it 512 KiB over TCP.
        let (port_tx, port_rx) = mpsc::channel();
        let receiver = in_node(&link, move || {
            let listener = TcpListener::bind((node_ip, 0)).expect("bind in the node");
            port_tx
                .send(listener.local_addr().expect("address").port())
                .expect("send the port");
            let (mut stream, _) = listener.accept().expect("accept");
            let mut received = Vec::new();
            stream.read_to_end(&mut received).expect("read");
            (received, Instant::now())
        });
        let port = port_rx.recv().expect("the node's port");
        let before = Instant::now();
        let mut stream =
            TcpStream::connect_timeout(&SocketAddr::from((node_ip, port)), Duration::from_secs(60))
                .expect("connect across the WAN");
        // SYN one way, SYN-ACK the other: never sooner than a round trip.
        assert!(
            before.elapsed() >= 2 * wan.delay,
            "connected in {:?}",
            before.elapsed()
        );
        let sent: Vec<u8> = (0..512 * 1024u32).map(|i| (i % 251) as u8).collect();
        let start = Instant::now();
        stream.write_all(&sent).expect("send");
        stream
            .shutdown(std::net::Shutdown::Write)
            .expect("shutdown");
        let (received, end) = receiver.join().expect("the node's receiver");
        assert!(received == sent, "the bytes arrived changed or cut short");
        // Every byte went through the rate limiter, then the delay.
        let floor = Duration::from_secs_f64(sent.len() as f64 * 8.0 / wan.rate as f64);
        assert!(
            end - start >= floor + wan.delay,
            "512 KiB crossed 5 Mbit/s in {:?}",
            end - start
        );
        let stats = link.wan().expect("a WAN").stats();
        // 5 % of the ~400 segments each way: TCP got them across all the same.
        assert!(
            stats.lost.load(Ordering::Relaxed) > 0,
            "nothing was lost: {stats:?}"
        );
        assert!(stats.forwarded.load(Ordering::Relaxed) > 360, "{stats:?}");

        // A burst of datagrams: none arrives sooner than the delay after its sending, nor
        // before the rate limiter has passed it and every one received before it.
        let (port_tx, port_rx) = mpsc::channel();
        let burst = in_node(&link, move || {
            let socket = UdpSocket::bind((node_ip, 0)).expect("bind in the node");
            socket
                .set_read_timeout(Some(Duration::from_secs(60)))
                .expect("a hang guard");
            port_tx
                .send(socket.local_addr().expect("address").port())
                .expect("send the port");
            let mut arrivals = Vec::new();
            let mut buffer = [0u8; 2048];
            loop {
                let len = socket.recv(&mut buffer).expect("a datagram");
                arrivals.push((Instant::now(), buffer[0], len));
                if buffer[0] == END {
                    return arrivals;
                }
            }
        });
        let to_node = SocketAddr::from((node_ip, port_rx.recv().expect("the node's port")));
        let socket = UdpSocket::bind((link.host_ip(), 0)).expect("bind on the host");
        let first = Instant::now();
        for i in 0..100u8 {
            socket.send_to(&[i; DATAGRAM], to_node).expect("send");
        }
        // The end marker may be lost too: sent until the node has one.
        while !burst.is_finished() {
            socket.send_to(&[END], to_node).expect("send the end");
            std::thread::sleep(Duration::from_millis(20));
        }
        let arrivals = burst.join().expect("the node's datagrams");
        let per_datagram = (DATAGRAM + 28) as f64 * 8.0 / wan.rate as f64;
        let data: Vec<_> = arrivals.iter().filter(|(_, tag, _)| *tag != END).collect();
        assert!(!data.is_empty(), "none of 100 datagrams arrived");
        for (n, (at, tag, len)) in data.iter().enumerate() {
            assert_eq!(*len, DATAGRAM, "datagram {tag}");
            let floor = Duration::from_secs_f64(per_datagram * (n + 1) as f64) + wan.delay;
            assert!(
                *at - first >= floor,
                "datagram {tag}, the {}th received, arrived {:?} after the first was sent",
                n + 1,
                *at - first
            );
        }

        // Cut: the node loses its route to the host; restored, it reaches it again.
        let host = TcpListener::bind((link.host_ip(), 0)).expect("bind on the host");
        let to_host = SocketAddr::from((link.host_ip(), host.local_addr().expect("addr").port()));
        let connect = move || TcpStream::connect_timeout(&to_host, Duration::from_secs(60));
        link.cut().expect("cut");
        let cut = in_node(&link, connect).join().expect("connect while cut");
        assert_eq!(
            cut.expect_err("connected over a cut link").kind(),
            std::io::ErrorKind::NetworkUnreachable
        );
        link.restore().expect("restore");
        in_node(&link, connect)
            .join()
            .expect("connect after restore")
            .expect("the host is reached again");

        // Dropped: no device, no namespace left.
        let (host_if, path) = (link.host_if.clone(), link.path());
        drop(link);
        let shown = Command::new("ip").args(["link", "show", &host_if]).output();
        assert!(
            !shown.expect("ip link show").status.success(),
            "{host_if} is left"
        );
        assert!(!path.exists(), "{} is left", path.display());
    }
}
