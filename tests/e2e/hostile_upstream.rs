//! A hostile upstream: a hand-written HTTP server in place of the apiserver (the real one
//! cannot be made to lie) answering a cached list with truncated JSON, items that are not
//! objects, an item of hundreds of MB, the wrong content type, or nothing at all. The
//! client gets a `Status` or a stream that visibly breaks off, never a list it could take
//! for whole, and the cache keeps the set the last good list committed.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use edgegate_testkit::Gateway;
use edgegate_testkit::process::proc_status_bytes;

use crate::support::{Env, Plain, client, get_accepting, metric, runtime, wait_readyz};

/// The component whose lists the gateway caches (`--cache-agents`).
const AGENT: &str = "hostile";
const LIST: &str = "/api/v1/namespaces/hostile/configmaps";
/// The item sent to show the framer's bound: far beyond the gateway's 16 MiB.
const HUGE: usize = 256 << 20;

/// What the stand-in answers to [`LIST`] (and a watch of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Good,
    Truncated,
    ShortOfItsLength,
    NotObjects,
    HugeItem,
    HugeEvent,
    HtmlAsJson,
    Html,
    NeverAnswers,
}

/// The stand-in apiserver: `/readyz` answers while `ready`, [`LIST`] as `mode` says,
/// anything else a 404 Status.
struct Stand {
    port: u16,
    mode: Arc<Mutex<(Mode, bool)>>,
}

impl Stand {
    fn start() -> Result<Stand> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let mode = Arc::new(Mutex::new((Mode::Good, true)));
        let shared = mode.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mode = *shared.lock().expect("not poisoned");
                std::thread::spawn(move || {
                    let _ = answer(stream, mode);
                });
            }
        });
        Ok(Stand { port, mode })
    }

    fn set(&self, mode: Mode) {
        self.mode.lock().expect("not poisoned").0 = mode;
    }

    fn set_ready(&self, ready: bool) {
        self.mode.lock().expect("not poisoned").1 = ready;
    }
}

fn configmap(name: &str, rv: u32) -> String {
    format!(
        r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"hostile","resourceVersion":"{rv}"}},"data":{{"k":"v"}}}}"#
    )
}

fn good_list() -> String {
    format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"10"}},"items":[{},{}]}}"#,
        configmap("a", 8),
        configmap("b", 9)
    )
}

/// Reads one request head and answers it, then closes.
fn answer(stream: TcpStream, (mode, ready): (Mode, bool)) -> Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let target = first
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let mut out = stream;
    let json = "application/json";
    let reply = |out: &mut TcpStream, code: &str, kind: &str, body: &str| {
        write!(
            out,
            "HTTP/1.1 {code}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if target.starts_with("/readyz") {
        let code = if ready {
            "200 OK"
        } else {
            "500 Internal Server Error"
        };
        reply(&mut out, code, "text/plain", "ok")?;
        return Ok(());
    }
    if !target.starts_with(LIST) {
        let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#;
        reply(&mut out, "404 Not Found", json, status)?;
        return Ok(());
    }
    let good = good_list();
    let head = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"11"},"items":["#;
    // Bodies without a length end when the connection closes.
    let open = |out: &mut TcpStream, kind: &str| {
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nConnection: close\r\n\r\n"
        )
    };
    match mode {
        Mode::Good => reply(&mut out, "200 OK", json, &good)?,
        Mode::Truncated => {
            open(&mut out, json)?;
            out.write_all(&good.as_bytes()[..good.len() - 40])?;
        }
        Mode::ShortOfItsLength => {
            let body = &good[..good.len() / 2];
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: {json}\r\nContent-Length: {}\r\n\r\n{body}",
                good.len()
            )?;
        }
        Mode::NotObjects => reply(&mut out, "200 OK", json, &format!("{head}1,\"two\",[3]]}}"))?,
        Mode::HugeItem | Mode::HugeEvent => {
            open(&mut out, json)?;
            let start = if mode == Mode::HugeItem {
                format!("{head}{}", configmap("c", 11).trim_end_matches('}'))
            } else {
                r#"{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"c","resourceVersion":"11"},"data":{"k":""#.to_owned()
            };
            out.write_all(start.as_bytes())?;
            let chunk = vec![b'x'; 1 << 20];
            // Stops when the gateway closes the connection.
            for _ in 0..HUGE / chunk.len() {
                out.write_all(&chunk)?;
            }
            out.write_all(b"\"}}]}")?;
        }
        Mode::HtmlAsJson => reply(
            &mut out,
            "200 OK",
            json,
            "<html><body>Bad Gateway</body></html>",
        )?,
        Mode::Html => reply(
            &mut out,
            "200 OK",
            "text/html",
            "<html><body>a portal</body></html>",
        )?,
        Mode::NeverAnswers => {
            // Held open, unanswered, until the gateway gives up and closes it.
            let mut rest = Vec::new();
            let _ = std::io::Read::read_to_end(&mut reader, &mut rest);
        }
    }
    Ok(())
}

/// The cached set of [`LIST`]: its resourceVersion and number of objects.
fn cached(gateway: &Gateway) -> Result<(String, u64)> {
    let sets: Vec<serde_json::Value> =
        serde_json::from_str(&edgegate_testkit::http::get(gateway.hub, "/v1/cache")?.body)?;
    let set = sets
        .iter()
        .find(|s| {
            s["component"] == AGENT
                && s["resource"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("configmaps"))
        })
        .context("no cached set of the list")?;
    Ok((
        set["resourceVersion"]
            .as_str()
            .or(set["resource_version"].as_str())
            .unwrap_or_default()
            .to_owned(),
        set["objects"].as_u64().unwrap_or_default(),
    ))
}

async fn list(
    client: &Plain,
    gateway: &Gateway,
    query: &str,
) -> Result<(http::StatusCode, bytes::Bytes)> {
    let url = format!("{}{LIST}{query}", gateway.url());
    get_accepting(client, &url, &format!("{AGENT}/v1"), "application/json").await
}

/// Every hostile answer to a cached list: the client gets a `Status` or a broken-off body,
/// the gateway holds at most its bound of an item, the cached set stays the good one, and
/// it is what the gateway serves once the stand-in goes away.
pub fn hostile_upstream_answers_leave_the_cache_untouched(env: &Env) -> Result<()> {
    let stand = Stand::start()?;
    let mut gateway = Gateway::start_to(
        &env.bin,
        &env.cluster,
        &format!("http://127.0.0.1:{}", stand.port),
        &[
            &format!("--cache-agents={AGENT}"),
            "--heartbeat-interval-seconds=1",
            "--request-timeout-seconds=3",
        ],
    )?;
    wait_readyz(&gateway, 200, "the stand-in to be found healthy")?;
    let rt = runtime();
    let client = client();
    let (code, body) = rt.block_on(list(&client, &gateway, ""))?;
    ensure!(code == 200, "the good list: {code}");
    ensure!(
        serde_json::from_slice::<serde_json::Value>(&body)?["items"]
            .as_array()
            .map(Vec::len)
            == Some(2)
    );
    edgegate_testkit::process::wait_until(
        Duration::from_secs(20),
        "the good list committed",
        // The count follows the store's write: both are waited for.
        || {
            cached(&gateway).is_ok_and(|c| c == ("10".to_owned(), 2))
                && metric(gateway.hub, "edgegate_cache_commits_total").is_ok_and(|n| n >= 1.0)
        },
    )?;
    let commits = metric(gateway.hub, "edgegate_cache_commits_total")?;
    let pid = gateway.process().context("the gateway runs")?.pid();

    for mode in [
        Mode::Truncated,
        Mode::ShortOfItsLength,
        Mode::NotObjects,
        Mode::HtmlAsJson,
        Mode::Html,
        Mode::HugeItem,
        Mode::HugeEvent,
        Mode::NeverAnswers,
    ] {
        stand.set(mode);
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5")?;
        let before = proc_status_bytes(pid, "VmRSS:")?;
        let query = if mode == Mode::HugeEvent {
            "?watch=true"
        } else {
            ""
        };
        let answer = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(60), list(&client, &gateway, query)).await
        });
        let growth = proc_status_bytes(pid, "VmHWM:")?.saturating_sub(before);
        let answer = answer.with_context(|| format!("{mode:?}: no answer within 60 s"))?;
        let seen = match &answer {
            Ok((code, body)) => format!(
                "{code} {:?}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            ),
            Err(error) => format!("broken off: {error:#}"),
        };
        println!(
            "{mode:?}: {seen}; peak RSS growth {:.1} MB",
            growth as f64 / 1e6
        );
        match (mode, &answer) {
            // The wrong content type is passed on as it came, uncached.
            (Mode::Html, Ok((code, body))) => {
                ensure!(
                    *code == 200 && body.starts_with(b"<html>"),
                    "{mode:?}: {seen}"
                )
            }
            // A watch ends with an ERROR event carrying a Status.
            (Mode::HugeEvent, Ok((code, body))) => {
                let text = String::from_utf8_lossy(body);
                let last: serde_json::Value =
                    serde_json::from_str(text.lines().last().unwrap_or_default())
                        .with_context(|| format!("{mode:?}: {seen}"))?;
                ensure!(
                    *code == 200 && last["type"] == "ERROR" && last["object"]["kind"] == "Status",
                    "{mode:?}: {seen}"
                );
                ensure!(body.len() < 1 << 20, "{mode:?}: {} bytes sent", body.len());
            }
            (Mode::NeverAnswers, Ok((code, body))) => {
                let status: serde_json::Value = serde_json::from_slice(body)?;
                ensure!(
                    *code == 504 && status["kind"] == "Status",
                    "{mode:?}: {seen}"
                );
            }
            // Garbled before its first item: nothing was sent yet, so a Status says so.
            (Mode::NotObjects | Mode::HtmlAsJson, Ok((code, body))) => {
                let status: serde_json::Value = serde_json::from_slice(body)?;
                ensure!(
                    *code == 502 && status["kind"] == "Status",
                    "{mode:?}: {seen}"
                );
            }
            (Mode::NotObjects | Mode::HtmlAsJson, Err(_)) => bail!("{mode:?}: {seen}"),
            // A list that is not whole must not reach the client as one.
            (_, Ok((code, body))) => ensure!(
                !code.is_success() || serde_json::from_slice::<serde_json::Value>(body).is_err(),
                "{mode:?} reached the client as a whole list: {seen}"
            ),
            (_, Err(_)) => ensure!(mode != Mode::Html, "{mode:?}: {seen}"),
        }
        if matches!(mode, Mode::HugeItem | Mode::HugeEvent) {
            ensure!(
                growth < 64 << 20,
                "{mode:?}: the gateway's RSS grew by {growth} bytes for a {HUGE}-byte object"
            );
        }
        ensure!(
            cached(&gateway)? == ("10".to_owned(), 2),
            "{mode:?} changed the cached set: {:?}",
            cached(&gateway)?
        );
        gateway
            .process()
            .context("the gateway runs")?
            .check_running()?;
    }
    ensure!(
        metric(gateway.hub, "edgegate_cache_commits_total")? == commits,
        "a hostile list was committed: {commits} commits before, {} after",
        metric(gateway.hub, "edgegate_cache_commits_total")?
    );

    // The stand-in fails its probes: the gateway serves the good set from its cache.
    stand.set_ready(false);
    wait_readyz(&gateway, 503, "the stand-in to be found unhealthy")?;
    let (code, body) = rt.block_on(list(&client, &gateway, ""))?;
    ensure!(code == 200, "offline: {code}");
    let offline: serde_json::Value = serde_json::from_slice(&body)?;
    let names: Vec<_> = offline["items"]
        .as_array()
        .context("items")?
        .iter()
        .map(|i| {
            i["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    ensure!(names == ["a", "b"], "offline: {offline}");
    Ok(())
}
