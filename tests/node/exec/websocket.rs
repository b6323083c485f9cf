//! A WebSocket exec that kubelet 1.20 accepts: on `v4.channel.k8s.io`, as kube-rs, the
//! Python and JavaScript clients and older kubectls' WebSocket paths open it. Sent raw
//! through edgegate's HTTPS proxy on the admin's token, from inside the node: the `101` is
//! checked (its `Sec-WebSocket-Accept` for the key sent, the subprotocol chosen), then
//! kubelet's frames are read until its close, each binary frame a channel's byte and what
//! was written on it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use edgegate_testkit::http::read_head;
use edgegate_testkit::process::unique;
use edgegate_testkit::{ADMIN_TOKEN, Testbed};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use super::kubectl::{GUARD, HTTPS_PROXY};
use super::protocol::Answers;

/// The subprotocol kubelet 1.20 speaks: a binary frame's first byte is its channel (0 stdin,
/// 1 stdout, 2 stderr, 3 the error channel: the `Status` the command ended with).
const V4: &str = "v4.channel.k8s.io";

/// What RFC 6455 appends to the key before hashing it into `Sec-WebSocket-Accept`.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The exit code of the command run.
const EXIT: &str = "3";

/// The `User-Agent`'s product, which edgegate counts the request under.
const AGENT: &str = "edgegate-node-test";

/// The opcode of a binary frame, the only data frame kubelet sends on [`V4`].
const BINARY: u8 = 2;
/// The opcode of the close, which kubelet sends once the command has ended.
const CLOSE: u8 = 8;

/// The headers of a WebSocket upgrade offering `protocol` with `key`, as the clients send
/// them (`Connection: Upgrade` aside).
pub fn upgrade_headers(key: &str, protocol: &str) -> [String; 4] {
    [
        "Upgrade: websocket".to_owned(),
        "Sec-WebSocket-Version: 13".to_owned(),
        format!("Sec-WebSocket-Key: {key}"),
        format!("Sec-WebSocket-Protocol: {protocol}"),
    ]
}

/// The path of an exec in the `host` pod, with `query`.
pub fn exec_path(query: &str) -> String {
    format!("/api/v1/namespaces/default/pods/host/exec?{query}")
}

/// `sh -c` printing a token on stdout and one on stderr, then exiting [`EXIT`], exec'd in
/// the `host` pod on [`V4`]: switched (`101`, the accept and subprotocol right), the tokens
/// on channels 1 and 2, a `NonZeroExitCode` `Status` with the exit code on channel 3, then
/// kubelet's close; edgegate counted the `101`.
pub fn exec_v4(testbed: &Testbed) -> Result<()> {
    let (out, err) = (unique("edgegate-ws-out"), unique("edgegate-ws-err"));
    let script = format!("echo {out}; echo {err} >&2; exit {EXIT}");
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("command", "sh"),
            ("command", "-c"),
            ("command", script.as_str()),
        ])
        .extend_pairs([("stdout", "true"), ("stderr", "true")])
        .finish();
    let mut nonce = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
        .map_err(|_| anyhow::anyhow!("no random bytes for the key"))?;
    let key = STANDARD.encode(nonce);
    let request = Request {
        ca: testbed.cloud.cluster.pki.ca_cert.clone(),
        path: exec_path(&query),
        key: key.clone(),
    };

    let before = Answers::of(testbed, AGENT)?;
    let start = Instant::now();
    // Its own thread in the node's network, where edgegate's HTTPS proxy is.
    let node = testbed.link.runtime()?;
    let (head, frames) = node
        .block_on(node.spawn_blocking(move || request.send()))
        .context("the WebSocket exec's thread")??;
    let took = start.elapsed();
    drop(node);

    let status = ensure_switched(&head, &key)?;
    let seen: Vec<String> = frames.iter().map(Frame::describe).collect();
    let channels = by_channel(&frames).with_context(|| format!("frames {seen:?}"))?;
    let text = |channel: u8| {
        String::from_utf8_lossy(channels.get(&channel).map_or(&[][..], |b| b)).into_owned()
    };
    let ended: serde_json::Value = serde_json::from_str(&text(3))
        .with_context(|| format!("channel 3 of the {V4} exec: {:?}", text(3)))?;
    let causes = ended["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    ensure!(
        channels.keys().all(|c| (1..=3).contains(c))
            && text(1) == format!("{out}\n")
            && text(2) == format!("{err}\n")
            && ended["status"] == "Failure"
            && ended["reason"] == "NonZeroExitCode"
            && causes
                .iter()
                .any(|c| c["reason"] == "ExitCode" && c["message"] == EXIT),
        "the {V4} exec's channels: stdout {:?}, stderr {:?}, error {:?} (frames {seen:?})",
        text(1),
        text(2),
        text(3)
    );

    let passed = Answers::of(testbed, AGENT)?.since(&before);
    ensure!(
        passed.to_string() == "1 get 101",
        "the {V4} exec: edgegate counted {passed}, not 1 get 101"
    );
    eprintln!(
        "WebSocket exec on {V4}: {status}, subprotocol {V4}, the accept right; frames {}: \
         the tokens on stdout and stderr, and on the error channel {}; {took:.1?} (through \
         edgegate: {passed})",
        seen.join(", "),
        text(3).trim(),
    );
    Ok(())
}

/// Checks that `head` switched to WebSocket on [`V4`], accepting `key`; its status line.
fn ensure_switched<'a>(head: &'a str, key: &str) -> Result<&'a str> {
    let status = head.lines().next().unwrap_or_default();
    ensure!(
        status == "HTTP/1.1 101 Switching Protocols",
        "the {V4} exec answered {head:?}"
    );
    let header = |name: &str| {
        head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let accept = STANDARD.encode(ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{ACCEPT_GUID}").as_bytes(),
    ));
    ensure!(
        header("Upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
            && header("Connection").is_some_and(|c| c.to_ascii_lowercase().contains("upgrade"))
            && header("Sec-WebSocket-Accept").as_deref() == Some(accept.as_str())
            && header("Sec-WebSocket-Protocol").as_deref() == Some(V4),
        "the {V4} exec's 101 (key {key}, accept {accept} expected): {head:?}"
    );
    Ok(status)
}

/// What each channel carried, from binary `frames` that end with the server's close.
fn by_channel(frames: &[Frame]) -> Result<BTreeMap<u8, Vec<u8>>> {
    let Some((_, data)) = frames.split_last().filter(|(last, _)| last.opcode == CLOSE) else {
        bail!("the {V4} exec's frames did not end with a close");
    };
    let mut channels: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
    for frame in data {
        let (BINARY, Some((channel, bytes))) = (frame.opcode, frame.payload.split_first()) else {
            bail!("the {V4} exec sent {}", frame.describe());
        };
        channels
            .entry(*channel)
            .or_default()
            .extend_from_slice(bytes);
    }
    Ok(channels)
}

/// The exec's upgrade request, to send from the node.
struct Request {
    /// The cluster's CA, which signed edgegate's serving certificate.
    ca: PathBuf,
    path: String,
    key: String,
}

impl Request {
    /// Sends the upgrade to edgegate's HTTPS proxy: the answer's head, and if it switched,
    /// every frame up to the server's close.
    fn send(self) -> Result<(String, Vec<Frame>)> {
        let mut roots = RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(&self.ca)?;
        roots.add_parsable_certificates(certs.collect::<Result<Vec<_>, _>>()?);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let address = HTTPS_PROXY.trim_start_matches("https://");
        let tcp =
            TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
        // Guards against a hang, not bounds on speed.
        tcp.set_read_timeout(Some(GUARD))?;
        tcp.set_write_timeout(Some(GUARD))?;
        let server = ServerName::try_from("127.0.0.1")?.to_owned();
        let mut stream = StreamOwned::new(ClientConnection::new(Arc::new(tls), server)?, tcp);

        let mut request = format!(
            "GET {} HTTP/1.1\r\nHost: {address}\r\nUser-Agent: {AGENT}/v1\r\n\
             Authorization: Bearer {ADMIN_TOKEN}\r\nConnection: Upgrade\r\n",
            self.path
        );
        for header in upgrade_headers(&self.key, V4) {
            request.push_str(&header);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes())?;
        stream.flush()?;
        let head = read_head(&mut stream)?;
        let mut frames = Vec::new();
        if head.starts_with("HTTP/1.1 101 ") {
            loop {
                let frame = Frame::read(&mut stream)
                    .with_context(|| format!("a frame after {} of them", frames.len()))?;
                let closed = frame.opcode == CLOSE;
                frames.push(frame);
                if closed {
                    break;
                }
            }
        }
        Ok((head, frames))
    }
}

/// A WebSocket frame from the server: whole (FIN), unmasked.
struct Frame {
    opcode: u8,
    payload: Vec<u8>,
}

impl Frame {
    /// The next frame of `stream`; its length in 7, 16 or 64 bits.
    fn read(stream: &mut impl Read) -> Result<Frame> {
        let mut first = [0u8; 2];
        stream.read_exact(&mut first)?;
        let (fin, opcode) = (first[0] & 0x80 != 0, first[0] & 0x0f);
        ensure!(
            fin,
            "a fragment (opcode {opcode}): kubelet writes whole frames"
        );
        ensure!(first[1] & 0x80 == 0, "a masked frame from the server");
        let length = match first[1] & 0x7f {
            126 => {
                let mut length = [0u8; 2];
                stream.read_exact(&mut length)?;
                u64::from(u16::from_be_bytes(length))
            }
            127 => {
                let mut length = [0u8; 8];
                stream.read_exact(&mut length)?;
                u64::from_be_bytes(length)
            }
            short => u64::from(short),
        };
        ensure!(length <= 1 << 20, "a frame of {length} bytes");
        let mut payload = vec![0u8; usize::try_from(length)?];
        stream.read_exact(&mut payload)?;
        Ok(Frame { opcode, payload })
    }

    /// In words: `ch1 25 B`, `close 1000`.
    fn describe(&self) -> String {
        match (self.opcode, self.payload.as_slice()) {
            (BINARY, [channel, rest @ ..]) => format!("ch{channel} {} B", rest.len()),
            (CLOSE, [high, low, ..]) => format!("close {}", u16::from_be_bytes([*high, *low])),
            (opcode, payload) => format!("opcode {opcode} {} B", payload.len()),
        }
    }
}
