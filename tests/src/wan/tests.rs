//! The shaper's arithmetic, and the emulator on a real link in a namespace.

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
