//! The gateway under a dying upstream and hostile clients.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{ADMIN_TOKEN, Gateway, http, process::wait_until};

use crate::support::{Env, client, get, runtime, wait_readyz};

/// Upstream stopped → a request gets a `Status` 502/503 within 3 s; upstream back →
/// requests succeed again without restarting the gateway.
pub fn upstream_outage_is_a_status_then_recovers(env: &Env) -> Result<()> {
    let cluster = env.private_cluster()?;
    let mut gateway = Gateway::start(&env.bin, &cluster, &["--heartbeat-interval-seconds=1"])?;
    let url = format!("{}/api/v1/namespaces/default", gateway.url());
    let rt = runtime();
    let client = client();
    let (status, _) = rt.block_on(get(&client, &url))?;
    ensure!(status == 200, "before the outage: {status}");

    cluster.stop_apiserver()?;
    let started = Instant::now();
    let (status, body) = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(3), get(&client, &url)).await })
        .context("no answer within 3 s while the apiserver is down")??;
    let took = started.elapsed();
    ensure!(status == 502 || status == 503, "while down: {status}");
    let status_body: serde_json::Value = serde_json::from_slice(&body)?;
    ensure!(status_body["kind"] == "Status", "{status_body}");
    ensure!(status_body["code"] == status.as_u16(), "{status_body}");
    println!(
        "while down: {status} in {took:?}: {}",
        status_body["message"]
    );

    wait_readyz(&gateway, 503, "readyz to report not ready")?;

    cluster.start_apiserver()?;
    wait_until(Duration::from_secs(15), "requests to succeed again", || {
        rt.block_on(get(&client, &url)).is_ok_and(|(s, _)| s == 200)
    })?;
    wait_readyz(&gateway, 200, "readyz to report ready")?;
    gateway.process().context("gateway runs")?.check_running()?;
    Ok(())
}

/// Garbage, oversized headers and a client vanishing mid-watch get a `Status` or a clean
/// close, and the gateway keeps serving.
pub fn hostile_input_never_takes_the_gateway_down(env: &Env) -> Result<()> {
    let mut gateway = env.gateway(&[])?;
    let proxy = gateway.proxy;
    let exchange = |raw: &[u8]| http::raw_exchange(proxy, raw, Duration::from_secs(10));

    let garbage: Vec<(&str, Vec<u8>)> = vec![
        ("percent soup", b"GET /%%%/%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec()),
        ("dot segments", b"GET /api/v1/namespaces/../../../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec()),
        ("bad field selector", b"GET /api/v1/pods?fieldSelector=%ff%fe&watch=%00 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec()),
        ("asterisk target", b"OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec()),
        ("connect", b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nConnection: close\r\n\r\n".to_vec()),
        ("not http", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03garbage\r\n\r\n".to_vec()),
        ("bad content length", b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n".to_vec()),
        ("long path", format!("GET /{} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "a".repeat(100_000)).into_bytes()),
        ("oversized header", format!("GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\nConnection: close\r\n\r\n", "b".repeat(1 << 20)).into_bytes()),
        ("many headers", {
            let mut r = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n".to_vec();
            for i in 0..500 {
                r.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
            }
            r.extend_from_slice(b"Connection: close\r\n\r\n");
            r
        }),
    ];
    for (what, raw) in &garbage {
        match exchange(raw) {
            Ok(response) => {
                println!("{what}: {}", response.status);
                if response.status >= 400
                    && response.status < 500
                    && !response.body.is_empty()
                    && response.head.contains("application/json")
                {
                    let status: serde_json::Value = serde_json::from_str(response.body.trim())
                        .with_context(|| format!("{what}: body is not JSON: {}", response.body))?;
                    ensure!(status["kind"] == "Status", "{what}: {status}");
                }
            }
            // A clean close without an answer is acceptable for bytes that are not HTTP.
            Err(error) => println!("{what}: closed ({error})"),
        }
        let healthz = http::get(gateway.hub, "/v1/healthz")?;
        ensure!(
            healthz.status == 200,
            "after {what}: healthz {}",
            healthz.status
        );
    }
    let connect = exchange(&garbage[4].1)?;
    ensure!(connect.status == 405, "CONNECT answered {}", connect.status);
    let asterisk = exchange(&garbage[3].1)?;
    ensure!(
        asterisk.status == 400,
        "OPTIONS * answered {}",
        asterisk.status
    );
    let oversized = exchange(&garbage[8].1)?;
    ensure!(
        oversized.status == 431,
        "a 1 MiB header answered {}",
        oversized.status
    );

    // A client that disconnects mid-watch: the stream is torn down and nothing stays in flight.
    for _ in 0..20 {
        let mut stream = std::net::TcpStream::connect(proxy)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "GET /api/v1/namespaces?watch=true HTTP/1.1\r\nHost: x\r\nUser-Agent: vanishing/v1\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\r\n"
        )?;
        let mut first = [0u8; 64];
        let n = stream.read(&mut first)?;
        ensure!(
            first[..n].starts_with(b"HTTP/1.1 200"),
            "watch opened: {}",
            String::from_utf8_lossy(&first[..n])
        );
        drop(stream);
    }
    wait_until(
        Duration::from_secs(10),
        "vanished watches to leave in-flight",
        || {
            http::get(gateway.hub, "/metrics").is_ok_and(|m| {
                m.body.lines().any(|l| {
                    l.starts_with(
                        r#"edgegate_in_flight_requests{component="vanishing",verb="watch""#,
                    ) && l.ends_with(" 0")
                })
            })
        },
    )?;

    let rt = runtime();
    let (status, _) = rt.block_on(get(
        &client(),
        &format!("{}/api/v1/namespaces/default", gateway.url()),
    ))?;
    ensure!(
        status == 200,
        "after the abuse a normal GET answered {status}"
    );
    gateway.process().context("gateway runs")?.check_running()?;
    Ok(())
}
