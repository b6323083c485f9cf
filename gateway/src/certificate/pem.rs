//! Certificates read from PEM text: the DER blocks, and the leaf's validity and name.

use std::time::SystemTime;

use super::error::CertificateError;

/// A certificate's validity period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// notBefore.
    pub not_before: SystemTime,
    /// notAfter.
    pub not_after: SystemTime,
}

impl Validity {
    /// Whether the certificate may be presented at `now`.
    pub fn valid_at(&self, now: SystemTime) -> bool {
        self.not_before <= now && now < self.not_after
    }
}

/// The DER certificates of a PEM text (other blocks, such as a key, are skipped).
pub fn parse_pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, CertificateError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertificateError::BadCertificate(e.to_string()))?;
    if certs.is_empty() {
        return Err(CertificateError::BadCertificate(
            "no certificate in the PEM text".to_owned(),
        ));
    }
    Ok(certs)
}

/// The validity and subject common name of the first certificate of a PEM text.
pub fn leaf_of(pem: &[u8]) -> Result<(Validity, String), CertificateError> {
    let certs = parse_pem_certificates(pem)?;
    let (_, cert) = x509_parser::parse_x509_certificate(&certs[0])
        .map_err(|e| CertificateError::BadCertificate(e.to_string()))?;
    let time = |t: x509_parser::time::ASN1Time| {
        let seconds = t.timestamp();
        if seconds >= 0 {
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds.unsigned_abs())
        } else {
            std::time::UNIX_EPOCH
        }
    };
    let validity = cert.validity();
    let common_name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    Ok((
        Validity {
            not_before: time(validity.not_before),
            not_after: time(validity.not_after),
        },
        common_name,
    ))
}
