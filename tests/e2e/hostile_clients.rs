//! Hostile and slow clients: thousands of idle connections, headers sent a byte at a time,
//! a watch client that stops reading. Other clients are served meanwhile, and what the
//! gateway holds for the hostile ones (file descriptors, memory) is bounded and given back.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use edgegate_testkit::process::{open_fds, proc_status_bytes, raise_fd_limit, wait_until};
use edgegate_testkit::{ADMIN_TOKEN, Gateway};

use crate::support::{Env, Plain, Watch, client, get, namespace, request, runtime};

/// Idle connections held at once.
const IDLE: usize = 10_000;
/// Longer than the gateway's 30 s wait for a first request, with room for a loaded machine.
const CLOSE_GUARD: Duration = Duration::from_secs(120);

/// Whether the peer has closed `stream` (EOF or reset) within `guard`; false if it is open.
fn closed_by_peer(stream: &mut TcpStream, guard: Duration) -> Result<bool> {
    stream.set_read_timeout(Some(guard))?;
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => Ok(true),
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Ok(false)
        }
        Err(_) => Ok(true),
    }
}

/// A GET and a watch (which sees an event) through the gateway.
fn served(gateway: &Gateway, ns: &str, name: &str) -> Result<()> {
    let rt = runtime();
    let client = client();
    rt.block_on(async {
        let (code, _) = get(
            &client,
            &format!("{}/api/v1/namespaces/{ns}", gateway.url()),
        )
        .await?;
        ensure!(code == 200, "a GET answered {code}");
        let url = format!(
            "{}/api/v1/namespaces/{ns}/configmaps?watch=true",
            gateway.url()
        );
        let mut watch = Watch::open(&client, &url, "e2e/v1").await?;
        create(&client, gateway, ns, name, 10).await?;
        watch
            .wait_for("ADDED", name, Duration::from_secs(30))
            .await?;
        Ok(())
    })
}

/// Creates ConfigMap `name` in `ns` with `kib` KiB of data, through the gateway.
async fn create(client: &Plain, gateway: &Gateway, ns: &str, name: &str, kib: usize) -> Result<()> {
    use http_body_util::BodyExt;
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"v":"{}"}}}}"#,
        "x".repeat(kib << 10)
    );
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let response = client
        .request(request(
            http::Method::POST,
            &url,
            Some(ADMIN_TOKEN),
            "e2e/v1",
            Some(&body),
        )?)
        .await?;
    let code = response.status();
    let text = response.into_body().collect().await?.to_bytes();
    ensure!(
        code == 201,
        "creating {name}: {code} {}",
        String::from_utf8_lossy(&text)
    );
    Ok(())
}

/// 10 000 connections that send nothing: the gateway accepts them, serves a GET and a watch
/// meanwhile, closes each within its wait for a first request, and its file descriptors
/// return to their baseline. A watch open across the closing is not idle and stays.
pub fn hostile_idle_connections_are_closed_and_others_served(env: &Env) -> Result<()> {
    raise_fd_limit(IDLE as u64 + 1_000)?;
    let mut gateway = env.gateway(&[])?;
    let ns = namespace(&env.cluster, "idle")?;
    served(&gateway, &ns, "warm")?;
    let pid = gateway.process().context("the gateway runs")?.pid();
    let (fds_before, rss_before) = (open_fds(pid)?, proc_status_bytes(pid, "VmRSS:")?);

    let opened = Instant::now();
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        idle.push(TcpStream::connect(gateway.proxy)?);
    }
    let connected = opened.elapsed();
    // Each is closed 30 s after it was accepted: on a machine so loaded that accepting them
    // takes longer, the first go before the last come, so most of them is enough.
    wait_until(CLOSE_GUARD, "the gateway to accept them", || {
        open_fds(pid).is_ok_and(|n| n >= fds_before + IDLE * 9 / 10)
    })
    .with_context(|| format!("{} descriptors open", open_fds(pid).unwrap_or_default()))?;
    let accepted = opened.elapsed();
    let (fds_held, rss_held) = (open_fds(pid)?, proc_status_bytes(pid, "VmRSS:")?);

    // Served while they are open; a watch opened now stays across their closing.
    served(&gateway, &ns, "during")?;
    let rt = runtime();
    let client = client();
    let url = format!(
        "{}/api/v1/namespaces/{ns}/configmaps?watch=true",
        gateway.url()
    );
    let mut across = rt.block_on(Watch::open(&client, &url, "e2e/v1"))?;

    let mut still_open = 0;
    for stream in &mut idle {
        let guard = CLOSE_GUARD
            .saturating_sub(opened.elapsed())
            .max(Duration::from_millis(1));
        if !closed_by_peer(stream, guard)? {
            still_open += 1;
        }
    }
    let closed_after = opened.elapsed();
    ensure!(
        still_open == 0,
        "{still_open} of {IDLE} idle connections still open after {CLOSE_GUARD:?}"
    );
    drop(idle);
    wait_until(
        Duration::from_secs(30),
        "the gateway's descriptors to return",
        || open_fds(pid).is_ok_and(|n| n <= fds_before + 16),
    )?;
    let (fds_after, rss_after) = (open_fds(pid)?, proc_status_bytes(pid, "VmRSS:")?);
    rt.block_on(async {
        create(&client, &gateway, &ns, "after", 1).await?;
        across
            .wait_for("ADDED", "after", Duration::from_secs(30))
            .await
    })
    .context("the watch open across the closing")?;
    served(&gateway, &ns, "later")?;
    println!(
        "{IDLE} idle connections (connected in {connected:?}, accepted in {accepted:?}): fds {fds_before} → {fds_held} → {fds_after}; RSS {:.1} MB → {:.1} MB ({:.0} bytes a connection) → {:.1} MB; all closed by the gateway {closed_after:?} after opening",
        rss_before as f64 / 1e6,
        rss_held as f64 / 1e6,
        (rss_held.saturating_sub(rss_before)) as f64 / IDLE as f64,
        rss_after as f64 / 1e6,
    );
    gateway
        .process()
        .context("the gateway runs")?
        .check_running()?;
    Ok(())
}

/// Headers a byte at a time (HTTP/1.1), and the HTTP/2 preface a byte at a time then
/// nothing: both connections are cut (the first by the header read timeout, the second by
/// the wait for a first request) long before they are done, and others are served meanwhile.
pub fn hostile_slowloris_headers_are_cut(env: &Env) -> Result<()> {
    let gateway = env.gateway(&[])?;
    let ns = namespace(&env.cluster, "slowloris")?;
    let proxy = gateway.proxy;
    // 1200 bytes at 4 a second would take five minutes.
    let mut slow_headers = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n".to_vec();
    slow_headers.extend(format!("X-Pad: {}\r\n\r\n", "a".repeat(1200)).bytes());
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n".to_vec();
    let cut = |bytes: Vec<u8>, pause: Duration| {
        std::thread::spawn(move || -> Result<(usize, Duration)> {
            let started = Instant::now();
            let mut stream = TcpStream::connect(proxy)?;
            for (sent, byte) in bytes.iter().enumerate() {
                if stream.write_all(&[*byte]).is_err() || closed_by_peer(&mut stream, pause)? {
                    return Ok((sent, started.elapsed()));
                }
            }
            // All sent (the preface but its last byte): now silent.
            if closed_by_peer(&mut stream, CLOSE_GUARD)? {
                return Ok((bytes.len(), started.elapsed()));
            }
            bail!("still open {:?} after the last byte", CLOSE_GUARD)
        })
    };
    let headers = cut(slow_headers.clone(), Duration::from_millis(250));
    let h2 = cut(preface.clone(), Duration::from_secs(1));
    let mut rounds = 0;
    while !(headers.is_finished() && h2.is_finished()) {
        served(&gateway, &ns, &format!("meanwhile-{rounds}"))?;
        rounds += 1;
        std::thread::sleep(Duration::from_secs(1));
    }
    let (sent, after) = headers.join().expect("no panic")?;
    ensure!(sent < slow_headers.len(), "the slow headers were all taken");
    let (preface_sent, preface_after) = h2.join().expect("no panic")?;
    println!(
        "slowloris: headers cut after {sent} of {} bytes ({after:?}); a stalled HTTP/2 preface ({preface_sent} bytes) cut after {preface_after:?}; {rounds} GETs and watches served meanwhile",
        slow_headers.len()
    );
    ensure!(rounds > 0, "nothing was served meanwhile");
    Ok(())
}

/// ConfigMaps created while a watch client has stopped reading, and their size.
const FLOOD: usize = 400;
const FLOOD_KIB: usize = 256;

/// Opens a watch of `ns`'s ConfigMaps as `agent` on a raw connection, reads its response
/// head, and returns the connection, never to be read again.
fn stalled_watch(gateway: &Gateway, ns: &str, agent: &str) -> Result<TcpStream> {
    let mut stream = TcpStream::connect(gateway.proxy)?;
    write!(
        stream,
        "GET /api/v1/namespaces/{ns}/configmaps?watch=true HTTP/1.1\r\nHost: x\r\nUser-Agent: {agent}\r\nAccept: application/json\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\r\n"
    )?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    ensure!(
        head.starts_with(b"HTTP/1.1 200"),
        "{agent}'s watch: {}",
        String::from_utf8_lossy(&head)
    );
    Ok(stream)
}

/// Two watch clients stop reading (one framed and teed, as kube-proxy; one passed through)
/// while 100 MiB of ConfigMaps are created: the gateway reads upstream only as fast as each
/// client takes bytes, so its peak RSS grows by far less than what flowed, and a third watch
/// of the same resource receives every event.
pub fn hostile_a_watch_client_that_stops_reading_holds_bounded_memory(env: &Env) -> Result<()> {
    let mut gateway = env.gateway(&[])?;
    let ns = namespace(&env.cluster, "stalled")?;
    let pid = gateway.process().context("the gateway runs")?.pid();
    let stalled = [
        stalled_watch(&gateway, &ns, "kube-proxy/v1.20.2")?,
        stalled_watch(&gateway, &ns, "e2e/v1")?,
    ];
    let rt = runtime();
    let client = client();
    let url = format!(
        "{}/api/v1/namespaces/{ns}/configmaps?watch=true",
        gateway.url()
    );
    let mut reader = rt.block_on(Watch::open(&client, &url, "e2e/v1"))?;
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")?;
    let before = proc_status_bytes(pid, "VmRSS:")?;
    let received = rt.block_on(async {
        use futures_util::StreamExt;
        let creates = async {
            let mut results = futures_util::stream::iter((0..FLOOD).map(|i| {
                let (client, gateway, ns) = (&client, &gateway, &ns);
                async move { create(client, gateway, ns, &format!("big-{i}"), FLOOD_KIB).await }
            }))
            .buffer_unordered(8);
            while let Some(result) = results.next().await {
                result?;
            }
            anyhow::Ok(())
        };
        let reads = async {
            let mut added = 0;
            while added < FLOOD {
                let event = reader
                    .next(Duration::from_secs(120))
                    .await?
                    .context("the reading watch ended")?;
                ensure!(event["type"] == "ADDED", "{}", event["type"]);
                added += 1;
            }
            anyhow::Ok(added)
        };
        let (created, added) = tokio::join!(creates, reads);
        created?;
        added
    })?;
    let peak = proc_status_bytes(pid, "VmHWM:")?;
    let growth = peak.saturating_sub(before);
    let flowed = FLOOD * (FLOOD_KIB << 10);
    println!(
        "a stalled watch: {received} events ({:.0} MB) created and received by another watch while two clients read nothing: peak RSS {:.1} MB → {:.1} MB, growth {:.1} MB",
        flowed as f64 / 1e6,
        before as f64 / 1e6,
        peak as f64 / 1e6,
        growth as f64 / 1e6
    );
    ensure!(
        growth < 48 << 20,
        "the gateway's RSS grew by {growth} bytes while {flowed} bytes went to clients that do not read"
    );
    drop(stalled);
    gateway
        .process()
        .context("the gateway runs")?
        .check_running()?;
    Ok(())
}
