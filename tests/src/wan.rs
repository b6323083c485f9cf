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
    /// The node scenarios' WAN: 150 ms RTT (75 ms each way), 1 % loss, 5 Mbit/s, and a
    /// 64 KiB queue (about 100 ms at that rate).
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
mod tests;
