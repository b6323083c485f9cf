//! Who sent a request, and so on whose identity it travels upstream and whose cache answers
//! it. On the plain proxy (loopback) that is the node: a request without credentials goes
//! on the gateway's identity. The HTTPS proxy is where pods arrive, and no identity of the
//! gateway's is lent there:
//! - a request with its own `Authorization` (a pod's service-account token) is sent with
//!   it alone, and cached in a partition of that identity ([`CachePolicy::partition`]);
//!   offline, it is answered from that partition only if the apiserver was seen to accept
//!   that very token (and, for a JWT, it has not expired);
//! - one without, over a connection whose client certificate (verified against the cluster
//!   CA) is this node's (`system:node:<node>`, group `system:nodes`), is the node's;
//! - any other client certificate is refused (`403`): its identity cannot be passed on;
//! - no credentials at all: `401`.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use http::HeaderMap;
use http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};

use super::proxy_error::ProxyError;
use crate::cache::CachePolicy;

/// The group of node identities.
const NODES_GROUP: &str = "system:nodes";
/// How many accepted credentials are remembered; the oldest go first.
const KNOWN_CAP: usize = 16_384;

/// The subject of a TLS client's certificate, once the handshake verified it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCertificate {
    /// Its common name: the Kubernetes user.
    pub user: String,
    /// Its organizations: the user's groups.
    pub groups: Vec<String>,
}

impl PeerCertificate {
    /// The subject of a DER certificate; `None` if it cannot be read.
    pub fn of(der: &[u8]) -> Option<PeerCertificate> {
        let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = certificate.subject();
        let user = subject.iter_common_name().next()?.as_str().ok()?.to_owned();
        let groups = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_owned))
            .collect();
        Some(PeerCertificate { user, groups })
    }

    /// The node this certificate is the identity of, if it is a node's.
    pub fn node(&self) -> Option<String> {
        let node = self.user.strip_prefix("system:node:")?;
        (!node.is_empty() && self.groups.iter().any(|g| g == NODES_GROUP)).then(|| node.to_owned())
    }

    fn is_node(&self, node: &str) -> bool {
        self.user.strip_prefix("system:node:") == Some(node)
            && self.groups.iter().any(|g| g == NODES_GROUP)
    }
}

/// On whose identity a request travels, and whose cache answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The node's components: on the gateway's identity unless the request has its own,
    /// cached as their component.
    Node,
    /// A caller on the HTTPS proxy with its own credentials: sent with them, never with
    /// the gateway's; cached in a partition of its identity.
    Own(OwnCredentials),
}

/// A caller's own credentials, as digests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnCredentials {
    /// Of the whole `Authorization` value: what the apiserver accepted.
    credential: [u8; 32],
    /// Of the identity it stands for: a JWT's issuer and subject, else the credential.
    identity: [u8; 32],
    /// A JWT's expiry (`exp`, Unix seconds).
    expires: Option<u64>,
}

impl Caller {
    /// The caller of a request on the HTTPS proxy, or why it is refused.
    pub fn of_secure(
        headers: &HeaderMap,
        certificate: Option<&PeerCertificate>,
        node: Option<&str>,
    ) -> Result<Caller, ProxyError> {
        if let Some(value) = headers.get(AUTHORIZATION) {
            return Ok(Caller::Own(OwnCredentials::of(value.as_bytes())));
        }
        match certificate {
            Some(certificate) if node.is_some_and(|node| certificate.is_node(node)) => {
                Ok(Caller::Node)
            }
            Some(certificate) => Err(ProxyError::CertificateNotPassedOn(certificate.user.clone())),
            None => Err(ProxyError::Unauthenticated),
        }
    }

    /// The component `component`'s responses are cached for, on this caller's identity.
    pub fn cache_component(&self, component: &str) -> String {
        match self {
            Caller::Node => component.to_owned(),
            Caller::Own(own) => CachePolicy::partition(component, &own.identity),
        }
    }
}

impl OwnCredentials {
    fn of(authorization: &[u8]) -> OwnCredentials {
        let credential: [u8; 32] = Sha256::digest(authorization).into();
        let claims = authorization
            .strip_prefix(b"Bearer ")
            .and_then(|token| std::str::from_utf8(token).ok())
            .and_then(jwt_claims);
        let (identity, expires) = match claims {
            Some((issuer, subject, expires)) => {
                let mut digest = Sha256::new();
                for part in [b"jwt".as_slice(), issuer.as_bytes(), subject.as_bytes()] {
                    digest.update((part.len() as u64).to_be_bytes());
                    digest.update(part);
                }
                (digest.finalize().into(), expires)
            }
            None => (credential, None),
        };
        OwnCredentials {
            credential,
            identity,
            expires,
        }
    }
}

/// A JWT's `iss`, `sub` and `exp`, read without checking its signature: only once the
/// apiserver accepted the token do they mean anything ([`KnownCredentials`]).
fn jwt_claims(token: &str) -> Option<(String, String, Option<u64>)> {
    let mut parts = token.trim().split('.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&payload).ok()?;
    let issuer = claims.get("iss")?.as_str()?.to_owned();
    let subject = claims.get("sub")?.as_str()?.to_owned();
    Some((issuer, subject, claims.get("exp").and_then(|e| e.as_u64())))
}

/// The credentials the apiserver was seen to accept on the HTTPS proxy (any answer but
/// `401`): offline, only they are answered from the cache.
#[derive(Debug, Default)]
pub struct KnownCredentials {
    seen: Mutex<Seen>,
}

/// Credential digests, and the order they came in.
#[derive(Debug, Default)]
struct Seen {
    set: HashSet<[u8; 32]>,
    order: VecDeque<[u8; 32]>,
}

impl KnownCredentials {
    /// Notes that the apiserver accepted `own`.
    pub fn accepted(&self, own: &OwnCredentials) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let Seen { set, order } = &mut *seen;
        if set.insert(own.credential) {
            order.push_back(own.credential);
            if order.len() > KNOWN_CAP
                && let Some(oldest) = order.pop_front()
            {
                set.remove(&oldest);
            }
        }
    }

    /// Whether `own` may be answered offline: accepted before, and not expired.
    pub fn answers_offline(&self, own: &OwnCredentials) -> Result<(), ProxyError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let known = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set
            .contains(&own.credential);
        if known && own.expires.is_none_or(|exp| exp > now) {
            Ok(())
        } else {
            Err(ProxyError::UnknownToken)
        }
    }
}

#[cfg(test)]
mod tests;
