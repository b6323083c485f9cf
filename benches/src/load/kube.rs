//! A small Kubernetes API client for the traffic harness, speaking on the wire as client-go
//! does: HTTP/2 over TLS to the cloud (one connection per client, every request multiplexed
//! on it), HTTP/1.1 in the clear to the gateway on loopback, `Accept` protobuf then JSON,
//! `Accept-Encoding: gzip`. And what a reflector must read of the answers: a list's
//! `resourceVersion` and `continue`, a watch event's type and object `resourceVersion`, in
//! protobuf or JSON.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http::{Method, Request, Response, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio_rustls::TlsConnector;

/// What client-go's clientsets send for built-in types.
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// The prefix of every Kubernetes protobuf message (`k8s\0`).
const MAGIC: &[u8] = b"k8s\0";

/// A client of one server, on one identity, with one `User-Agent`.
pub struct Client {
    authority: String,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    token: Option<String>,
    user_agent: String,
    h2: Mutex<Option<http2::SendRequest<Full<Bytes>>>>,
}

impl Client {
    /// A client of `server` (`https://host:port` trusted through the CA file `ca`, or
    /// `http://host:port`), sending `token` as a bearer token if given.
    pub fn new(
        server: &str,
        ca: Option<&Path>,
        token: Option<String>,
        user_agent: &str,
    ) -> Result<Client> {
        let (tls, authority) = if let Some(authority) = server.strip_prefix("https://") {
            let ca = ca.context("an https server needs a CA")?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(ca)? {
                roots.add(cert?)?;
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()?
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec()];
            let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
            let name = ServerName::try_from(host.to_owned())?;
            (
                Some((TlsConnector::from(Arc::new(config)), name)),
                authority,
            )
        } else if let Some(authority) = server.strip_prefix("http://") {
            (None, authority)
        } else {
            bail!("{server}: not an http(s) URL");
        };
        Ok(Client {
            authority: authority.trim_end_matches('/').to_owned(),
            tls,
            token,
            user_agent: user_agent.to_owned(),
            h2: Mutex::new(None),
        })
    }

    /// `GET path`, as client-go asks for built-in objects.
    pub async fn get(&self, path: &str) -> Result<Response<Incoming>> {
        self.send(Method::GET, path, None).await
    }

    /// `method path` with a JSON body (`content_type` for patches).
    pub async fn send_json(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: &serde_json::Value,
    ) -> Result<(u16, Bytes)> {
        let body = Some((content_type, Bytes::from(body.to_string())));
        let response = self.send(method, path, body).await?;
        let status = response.status().as_u16();
        Ok((status, response.into_body().collect().await?.to_bytes()))
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Bytes)>,
    ) -> Result<Response<Incoming>> {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::ACCEPT, ACCEPT)
            .header(header::ACCEPT_ENCODING, "gzip")
            .header(header::USER_AGENT, &self.user_agent);
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let (content_type, bytes) = body.unwrap_or(("", Bytes::new()));
        if !content_type.is_empty() {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        let Some((connector, name)) = &self.tls else {
            let request = request
                .header(header::HOST, &self.authority)
                .body(Full::new(bytes))?;
            let stream = TcpStream::connect(&self.authority).await?;
            stream.set_nodelay(true)?;
            let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(connection);
            return Ok(sender.send_request(request).await?);
        };
        let uri = format!("https://{}{path}", self.authority);
        let request = request.uri(uri).body(Full::new(bytes))?;
        let mut h2 = self.h2.lock().await;
        if let Some(sender) = h2.as_mut().filter(|s| !s.is_closed()) {
            sender.ready().await?;
            let pending = sender.send_request(request);
            drop(h2);
            return Ok(pending.await?);
        }
        let stream = TcpStream::connect(&self.authority).await?;
        stream.set_nodelay(true)?;
        let stream = connector.connect(name.clone(), stream).await?;
        let (mut sender, connection) =
            http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        let pending = sender.send_request(request);
        *h2 = Some(sender);
        drop(h2);
        Ok(pending.await?)
    }
}

/// A whole response body, gunzipped if it came compressed.
pub async fn body_bytes(response: Response<Incoming>) -> Result<Vec<u8>> {
    let gzip = is_gzip(&response);
    let bytes = response.into_body().collect().await?.to_bytes();
    if !gzip {
        return Ok(bytes.to_vec());
    }
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut plain)?;
    Ok(plain)
}

/// Whether a response's body is gzip-compressed.
pub fn is_gzip(response: &Response<Incoming>) -> bool {
    response
        .headers()
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"))
}

/// Whether a response is protobuf (else JSON).
pub fn is_protobuf(response: &Response<Incoming>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| {
            v.as_bytes()
                .starts_with(b"application/vnd.kubernetes.protobuf")
        })
}

/// A list's `metadata.resourceVersion` and `metadata.continue` (empty when absent).
pub fn list_meta(body: &[u8], protobuf: bool) -> Result<(String, String)> {
    if protobuf {
        // Unknown{raw: XList{metadata: ListMeta{resourceVersion = 2, continue = 3}}}
        let list = field(unwrap(body)?, 2).context("a protobuf list without raw")?;
        let meta = field(list, 1).unwrap_or_default();
        let text = |n| String::from_utf8_lossy(field(meta, n).unwrap_or_default()).into_owned();
        return Ok((text(2), text(3)));
    }
    let list: serde_json::Value = serde_json::from_slice(body)?;
    let text = |key: &str| {
        list["metadata"][key]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    Ok((text("resourceVersion"), text("continue")))
}

/// A watch event's type and its object's `metadata.resourceVersion`, from one protobuf
/// frame (without its length) or one JSON line.
pub fn watch_event(event: &[u8], protobuf: bool) -> Result<(String, String)> {
    if protobuf {
        // WatchEvent{type = 1, object = 2: RawExtension{raw = 1: the object}}; the object's
        // ObjectMeta is its field 1, resourceVersion its field 6.
        let event = match unwrap(event) {
            Ok(raw) => field(raw, 2).context("an event without raw")?,
            Err(_) => event,
        };
        let kind = String::from_utf8_lossy(field(event, 1).unwrap_or_default()).into_owned();
        let raw = field(event, 2)
            .and_then(|o| field(o, 1))
            .unwrap_or_default();
        let object = unwrap(raw).ok().and_then(|o| field(o, 2)).unwrap_or(raw);
        let meta = field(object, 1).unwrap_or_default();
        let version = String::from_utf8_lossy(field(meta, 6).unwrap_or_default()).into_owned();
        return Ok((kind, version));
    }
    let event: serde_json::Value = serde_json::from_slice(event)?;
    let version = event["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Ok((
        event["type"].as_str().unwrap_or_default().to_owned(),
        version,
    ))
}

/// The message after the `k8s\0` magic: an `Unknown` envelope.
fn unwrap(message: &[u8]) -> Result<&[u8]> {
    message
        .strip_prefix(MAGIC)
        .context("not a Kubernetes protobuf message")
}

/// The first length-delimited field `number` of a protobuf message.
fn field(mut message: &[u8], number: u64) -> Option<&[u8]> {
    while !message.is_empty() {
        let key = varint(&mut message)?;
        match key & 7 {
            0 => {
                varint(&mut message)?;
            }
            1 => message = message.get(8..)?,
            5 => message = message.get(4..)?,
            2 => {
                let len = usize::try_from(varint(&mut message)?).ok()?;
                let value = message.get(..len)?;
                message = &message[len..];
                if key >> 3 == number {
                    return Some(value);
                }
            }
            _ => return None,
        }
    }
    None
}

fn varint(message: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = message.split_first()?;
        *message = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_field(number: u8, value: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, u8::try_from(value.len()).unwrap()];
        out.extend_from_slice(value);
        out
    }

    fn envelope(raw: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend(bytes_field(1, b"typemeta"));
        out.extend(bytes_field(2, raw));
        out
    }

    #[test]
    fn reads_a_protobuf_lists_version_and_continue() {
        let mut meta = bytes_field(2, b"1234");
        meta.extend(bytes_field(3, b"next"));
        let mut list = bytes_field(1, &meta);
        list.extend(bytes_field(2, b"an item"));
        let (version, next) = list_meta(&envelope(&list), true).unwrap();
        assert_eq!((version.as_str(), next.as_str()), ("1234", "next"));
    }

    #[test]
    fn reads_a_protobuf_events_type_and_version() {
        // A varint field before the ones we read, as real objects have.
        let mut meta = vec![0x38, 0x96, 0x01];
        meta.extend(bytes_field(1, b"name"));
        meta.extend(bytes_field(6, b"77"));
        let object = envelope(&bytes_field(1, &meta));
        let mut event = bytes_field(1, b"MODIFIED");
        event.extend(bytes_field(2, &bytes_field(1, &object)));
        let (kind, version) = watch_event(&envelope(&event), true).unwrap();
        assert_eq!((kind.as_str(), version.as_str()), ("MODIFIED", "77"));
    }

    #[test]
    fn reads_json_lists_and_events() {
        let list = br#"{"metadata":{"resourceVersion":"9","continue":"c"},"items":[]}"#;
        assert_eq!(list_meta(list, false).unwrap(), ("9".into(), "c".into()));
        let event = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"10"}}}"#;
        assert_eq!(
            watch_event(event, false).unwrap(),
            ("BOOKMARK".into(), "10".into())
        );
    }
}
