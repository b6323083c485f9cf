//! A minimal blocking HTTP/1.1 client for probes and raw-request tests: one request per
//! connection, the whole answer read back as text.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result};

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// The header block as sent.
    pub head: String,
    /// The body (chunked framing left as is).
    pub body: String,
}

/// Sends `request` (a full HTTP/1.1 request, `Connection: close` advised) as bytes and reads
/// the answer until the server closes, or `timeout` passes without data.
pub fn raw_exchange(addr: SocketAddr, request: &[u8], timeout: Duration) -> Result<RawResponse> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.write_all(request)?;
    let mut bytes = Vec::new();
    stream
        .read_to_end(&mut bytes)
        .context("reading the response")?;
    parse(&bytes)
}

/// `GET path` with `Connection: close`.
pub fn get(addr: SocketAddr, path: &str) -> Result<RawResponse> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    raw_exchange(addr, request.as_bytes(), Duration::from_secs(10))
}

/// Reads a response's head from `stream`, byte by byte up to its blank line, leaving what
/// follows (a body, or a switched protocol's first bytes) unread.
pub fn read_head(stream: &mut impl Read) -> Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream
            .read_exact(&mut byte)
            .context("reading a response's head")?;
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

fn parse(bytes: &[u8]) -> Result<RawResponse> {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .context("no status line")?
        .parse()
        .context("bad status code")?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .replace(' ', "")
            .starts_with("transfer-encoding:chunked")
    });
    Ok(RawResponse {
        status,
        head: head.to_owned(),
        body: if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
    })
}

/// The payload of a chunked body (extensions and trailers ignored); stops at what is there.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size_line, rest)) = body.split_once("\r\n") {
        let size = size_line.split(';').next().unwrap_or_default().trim();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            out.push_str(rest.get(..size.min(rest.len())).unwrap_or_default());
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}
