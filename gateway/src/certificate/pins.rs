//! What token discovery trusts, checked as kubeadm checks it: the bootstrap token's
//! signature on the `kube-public/cluster-info` kubeconfig (a detached JWS, HS256 keyed by
//! the token's secret, written by kube-controller-manager's bootstrapsigner), and the
//! cluster CA's public key against `--discovery-token-ca-cert-hash` pins
//! (`sha256:<hex>` of the DER SubjectPublicKeyInfo).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use super::error::CertificateError;

/// A bootstrap token, `<id>.<secret>` (`[a-z0-9]{6}.[a-z0-9]{16}`).
#[derive(Clone, PartialEq, Eq)]
pub struct JoinToken {
    /// The public part: names the token's Secret (`bootstrap-token-<id>`) and its signature.
    pub id: String,
    /// The secret part.
    secret: String,
}

impl std::fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JoinToken({}.****)", self.id)
    }
}

impl JoinToken {
    /// Parses `<id>.<secret>`.
    pub fn parse(token: &str) -> Result<JoinToken, CertificateError> {
        let token = token.trim();
        let valid = |part: &str, len: usize| {
            part.len() == len
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        };
        match token.split_once('.') {
            Some((id, secret)) if valid(id, 6) && valid(secret, 16) => Ok(JoinToken {
                id: id.to_owned(),
                secret: secret.to_owned(),
            }),
            _ => Err(CertificateError::BadToken),
        }
    }

    /// The whole token, as sent in `Authorization: Bearer`.
    pub fn bearer(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }

    /// The key of the ConfigMap's signature by this token.
    pub fn signature_key(&self) -> String {
        format!("jws-kubeconfig-{}", self.id)
    }

    /// Checks a detached JWS (`<header>..<signature>`) over `content`: HS256 keyed by the
    /// secret, with this token's id as `kid`.
    pub fn verify_signature(&self, content: &str, detached: &str) -> Result<(), CertificateError> {
        let bad = |why: &str| CertificateError::BadSignature(why.to_owned());
        let (header, signature) = detached
            .split_once("..")
            .ok_or_else(|| bad("not a detached JWS"))?;
        let header_json = URL_SAFE_NO_PAD
            .decode(header)
            .map_err(|_| bad("header is not base64url"))?;
        let header_fields: serde_json::Value =
            serde_json::from_slice(&header_json).map_err(|_| bad("header is not JSON"))?;
        if header_fields["alg"] != "HS256" {
            return Err(bad("algorithm is not HS256"));
        }
        if header_fields["kid"] != self.id.as_str() {
            return Err(bad("signed by another token"));
        }
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| bad("signature is not base64url"))?;
        let signed = format!("{header}.{}", URL_SAFE_NO_PAD.encode(content));
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.secret.as_bytes());
        ring::hmac::verify(&key, signed.as_bytes(), &signature)
            .map_err(|_| bad("does not match the token"))
    }
}

/// The `--discovery-token-ca-cert-hash` values: SHA-256 digests of CA public keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaPins(Vec<[u8; 32]>);

impl CaPins {
    /// Parses `sha256:<64 hex digits>` values (the only kind kubeadm writes).
    pub fn parse(values: &[String]) -> Result<CaPins, CertificateError> {
        let parse_one = |value: &str| -> Option<[u8; 32]> {
            let hex = value.trim().strip_prefix("sha256:")?;
            if hex.len() != 64 {
                return None;
            }
            let mut digest = [0u8; 32];
            for (i, byte) in digest.iter_mut().enumerate() {
                *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
            }
            Some(digest)
        };
        values
            .iter()
            .map(|v| parse_one(v).ok_or_else(|| CertificateError::BadPin(v.clone())))
            .collect::<Result<_, _>>()
            .map(CaPins)
    }

    /// Whether no pin was given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks that one of the certificates of `ca_pem` has a pinned public key.
    pub fn check(&self, ca_pem: &[u8]) -> Result<(), CertificateError> {
        let found = ca_key_hashes(ca_pem)?;
        if found.iter().any(|hash| self.0.contains(hash)) {
            return Ok(());
        }
        Err(CertificateError::PinMismatch(
            found.iter().map(|h| format!("sha256:{}", hex(h))).collect(),
        ))
    }
}

/// `sha256` of each certificate's DER SubjectPublicKeyInfo, as kubeadm pins a CA.
pub fn ca_key_hashes(ca_pem: &[u8]) -> Result<Vec<[u8; 32]>, CertificateError> {
    let certs = super::pem::parse_pem_certificates(ca_pem)?;
    certs
        .iter()
        .map(|der| {
            let (_, cert) = x509_parser::parse_x509_certificate(der)
                .map_err(|e| CertificateError::BadCertificate(e.to_string()))?;
            Ok(Sha256::digest(cert.tbs_certificate.subject_pki.raw).into())
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use rcgen::PublicKeyData;

    use super::*;

    fn token() -> JoinToken {
        JoinToken::parse("abcdef.0123456789abcdef").unwrap()
    }

    /// A detached JWS as the bootstrapsigner writes it.
    fn sign(content: &str, kid: &str, secret: &str) -> String {
        let header = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"HS256","kid":"{kid}"}}"#));
        let signed = format!("{header}.{}", URL_SAFE_NO_PAD.encode(content));
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        let tag = ring::hmac::sign(&key, signed.as_bytes());
        format!("{header}..{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    #[test]
    fn tokens_have_kubeadms_shape() {
        assert_eq!(token().id, "abcdef");
        assert_eq!(token().bearer(), "abcdef.0123456789abcdef");
        for bad in [
            "abcdef0123456789abcdef",
            "ABCDEF.0123456789abcdef",
            "abcde.0123456789abcdef",
            "",
        ] {
            assert!(JoinToken::parse(bad).is_err(), "{bad}");
        }
        assert!(!format!("{:?}", token()).contains("0123456789abcdef"));
    }

    #[test]
    fn the_signature_of_the_token_is_accepted_and_any_other_refused() {
        let content = "apiVersion: v1\nclusters: []\n";
        let secret = "0123456789abcdef";
        token()
            .verify_signature(content, &sign(content, "abcdef", secret))
            .unwrap();
        let refused = [
            sign("apiVersion: v1\nclusters: [x]\n", "abcdef", secret),
            sign(content, "abcdef", "fedcba9876543210"),
            sign(content, "zzzzzz", secret),
            "not-a-jws".to_owned(),
        ];
        for signature in refused {
            let error = token().verify_signature(content, &signature).unwrap_err();
            assert!(
                matches!(error, CertificateError::BadSignature(_)),
                "{error}"
            );
        }
    }

    #[test]
    fn the_ca_must_have_a_pinned_public_key() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let pem = cert.pem();
        // kubeadm's pin: sha256 over the DER SubjectPublicKeyInfo.
        let expected = format!(
            "sha256:{}",
            hex(&Sha256::digest(key.subject_public_key_info()))
        );
        CaPins::parse(std::slice::from_ref(&expected))
            .unwrap()
            .check(pem.as_bytes())
            .unwrap();
        let other = format!("sha256:{}", "00".repeat(32));
        let error = CaPins::parse(&[other])
            .unwrap()
            .check(pem.as_bytes())
            .unwrap_err();
        assert!(error.to_string().contains(&expected), "{error}");
        for bad in ["sha1:00", "sha256:zz", "00"] {
            assert!(CaPins::parse(&[bad.to_owned()]).is_err(), "{bad}");
        }
    }
}
