//! The node's certificate requests: a fresh ECDSA P-256 key, a PKCS#10 request for
//! `CN=system:node:<node>, O=system:nodes(, O=…)` (the client certificate) or for
//! `CN=system:node:<node>, O=system:nodes` with the HTTPS proxy's names (the serving
//! certificate), sent as a CertificateSigningRequest and waited on until it is issued.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::api::{Api, ObjectMeta, PostParams};
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, PublicKeyData, SigningKey};
use yasna::models::ObjectIdentifier;

use super::error::CertificateError;

/// The group every node's certificate names; alone, kube-controller-manager approves it.
pub const NODES_GROUP: &str = "system:nodes";
/// The signer of kubelet's client certificates, which kube-controller-manager approves
/// (`nodeclient`, `selfnodeclient`) when the subject is exactly a node's.
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The signer YurtHub asks, for a subject with other organizations (OpenYurt's
/// yurt-manager approves those).
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// The usages of a kubelet client certificate; kube-controller-manager 1.20 approves
/// exactly these.
pub const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];
/// The signer of node serving certificates; kube-controller-manager signs but does not
/// approve its requests (OpenYurt's yurt-manager, or an operator, does).
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The usages of a serving certificate, as the kubelet-serving signer allows them.
pub const SERVING_USAGES: [&str; 3] = ["digital signature", "key encipherment", "server auth"];

/// How long an issued certificate is waited for before the request is made again.
const ISSUE_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The organizations of the node's certificate: `system:nodes`, then `extra` (duplicates
/// dropped).
pub fn organizations(extra: &[String]) -> Vec<String> {
    let mut orgs = vec![NODES_GROUP.to_owned()];
    for org in extra {
        if !org.is_empty() && !orgs.contains(org) {
            orgs.push(org.clone());
        }
    }
    orgs
}

/// The signer to ask: kubelet's when the subject is exactly a node's, else YurtHub's.
pub fn signer_for(orgs: &[String]) -> &'static str {
    if orgs == [NODES_GROUP] {
        KUBELET_CLIENT_SIGNER
    } else {
        CLIENT_SIGNER
    }
}

/// A new key and a DER certificate request for `common_name` and `orgs`.
pub fn new_request(
    common_name: &str,
    orgs: &[String],
) -> Result<(KeyPair, Vec<u8>), CertificateError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(CertificateError::Key)?;
    // rcgen's names hold one value per attribute type; a node may have several O's.
    let info = yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_u8(0);
            w.next().write_sequence(|w| {
                for org in orgs {
                    write_attribute(w.next(), &[2, 5, 4, 10], org);
                }
                write_attribute(w.next(), &[2, 5, 4, 3], common_name);
            });
            w.next().write_der(&key.subject_public_key_info());
            w.next()
                .write_tagged_implicit(yasna::Tag::context(0), |w| w.write_set(|_| {}));
        })
    });
    let signature = key.sign(&info).map_err(CertificateError::Key)?;
    let request = yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_der(&info);
            w.next().write_sequence(|w| {
                // ecdsa-with-SHA256
                w.next()
                    .write_oid(&ObjectIdentifier::from_slice(&[1, 2, 840, 10045, 4, 3, 2]));
            });
            w.next().write_bitvec_bytes(&signature, signature.len() * 8);
        })
    });
    Ok((key, request))
}

/// A new key and a DER certificate request for the serving certificate of `common_name`:
/// `O=system:nodes` and `names` (IP addresses and DNS names) as subject alternative names.
pub fn new_serving_request(
    common_name: &str,
    names: &[String],
) -> Result<(KeyPair, Vec<u8>), CertificateError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(CertificateError::Key)?;
    let mut params =
        rcgen::CertificateParams::new(names.to_vec()).map_err(CertificateError::Key)?;
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, NODES_GROUP);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    let request = params
        .serialize_request(&key)
        .map_err(CertificateError::Key)?;
    Ok((key, request.der().to_vec()))
}

fn write_attribute(w: yasna::DERWriter<'_>, oid: &[u64], value: &str) {
    w.write_set(|w| {
        w.next().write_sequence(|w| {
            w.next().write_oid(&ObjectIdentifier::from_slice(oid));
            w.next().write_utf8_string(value);
        })
    });
}

/// PEM of a DER block.
pub fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut text = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        text.push_str(&String::from_utf8_lossy(line));
        text.push('\n');
    }
    text.push_str(&format!("-----END {label}-----\n"));
    text
}

/// The CertificateSigningRequest object for a DER request to `signer` for `usages`.
pub fn csr_object(request_der: &[u8], signer: &str, usages: &[&str]) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some("csr-".to_owned()),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(pem("CERTIFICATE REQUEST", request_der).into_bytes()),
            signer_name: signer.to_owned(),
            usages: Some(usages.iter().map(|u| (*u).to_owned()).collect()),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    }
}

/// Creates the request and waits until it is issued; returns the certificate chain (PEM).
pub async fn submit(
    client: kube::Client,
    csr: &CertificateSigningRequest,
) -> Result<Vec<u8>, CertificateError> {
    let api: Api<CertificateSigningRequest> = Api::all(client);
    let created = api
        .create(&PostParams::default(), csr)
        .await
        .map_err(CertificateError::Api)?;
    let name = created.metadata.name.clone().unwrap_or_default();
    tracing::info!(csr = %name, signer = %csr.spec.signer_name, "certificate requested; waiting for it to be approved and issued");
    let settled =
        |csr: Option<&CertificateSigningRequest>| csr.is_some_and(|csr| outcome(csr).is_some());
    let done = tokio::time::timeout(
        ISSUE_TIMEOUT,
        kube::runtime::wait::await_condition(api, &name, settled),
    )
    .await
    .map_err(|_| CertificateError::NotIssued(name.clone(), "not issued in time".to_owned()))?
    .map_err(|e| CertificateError::NotIssued(name.clone(), e.to_string()))?;
    match done.as_ref().and_then(outcome) {
        Some(Ok(cert)) => Ok(cert),
        Some(Err(why)) => Err(CertificateError::NotIssued(name, why)),
        None => Err(CertificateError::NotIssued(name, "deleted".to_owned())),
    }
}

/// The certificate, or why none will come (denied or failed); `None` while pending.
fn outcome(csr: &CertificateSigningRequest) -> Option<Result<Vec<u8>, String>> {
    let status = csr.status.as_ref()?;
    for condition in status.conditions.iter().flatten() {
        if matches!(condition.type_.as_str(), "Denied" | "Failed") && condition.status == "True" {
            let message = condition.message.clone().unwrap_or_default();
            return Some(Err(format!("{}: {message}", condition.type_)));
        }
    }
    status
        .certificate
        .as_ref()
        .filter(|c| !c.0.is_empty())
        .map(|c| Ok(c.0.clone()))
}

#[cfg(test)]
mod tests {
    use x509_parser::certification_request::X509CertificationRequest;
    use x509_parser::prelude::FromDer;

    use super::*;

    #[test]
    fn the_request_names_the_node_its_groups_and_a_p256_key() {
        let orgs = organizations(&["openyurt:edge".to_owned(), "system:nodes".to_owned()]);
        assert_eq!(orgs, ["system:nodes", "openyurt:edge"]);
        let (key, der) = new_request("system:node:edge-1", &orgs).unwrap();
        let (rest, request) = X509CertificationRequest::from_der(&der).unwrap();
        assert!(rest.is_empty());
        request.verify_signature().unwrap();
        let subject = &request.certification_request_info.subject;
        let cn: Vec<_> = subject
            .iter_common_name()
            .map(|a| a.as_str().unwrap())
            .collect();
        let o: Vec<_> = subject
            .iter_organization()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(cn, ["system:node:edge-1"]);
        assert_eq!(o, ["system:nodes", "openyurt:edge"]);
        let spki = &request.certification_request_info.subject_pki;
        assert_eq!(spki.raw, key.subject_public_key_info());
        // id-ecPublicKey on prime256v1
        assert_eq!(spki.algorithm.algorithm.to_id_string(), "1.2.840.10045.2.1");
        let curve = spki
            .algorithm
            .parameters
            .as_ref()
            .unwrap()
            .as_oid()
            .unwrap();
        assert_eq!(curve.to_id_string(), "1.2.840.10045.3.1.7");
        assert!(
            request
                .requested_extensions()
                .is_none_or(|mut e| e.next().is_none())
        );
    }

    #[test]
    fn the_serving_request_names_the_node_and_its_addresses() {
        let names = [
            "169.254.2.1",
            "127.0.0.1",
            "edge-1",
            "kubernetes.default.svc",
        ]
        .map(str::to_owned);
        let (key, der) = new_serving_request("system:node:edge-1", &names).unwrap();
        let (_, request) = X509CertificationRequest::from_der(&der).unwrap();
        request.verify_signature().unwrap();
        let info = &request.certification_request_info;
        let o: Vec<_> = info
            .subject
            .iter_organization()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(o, [NODES_GROUP]);
        assert_eq!(
            info.subject
                .iter_common_name()
                .next()
                .unwrap()
                .as_str()
                .unwrap(),
            "system:node:edge-1"
        );
        assert_eq!(info.subject_pki.raw, key.subject_public_key_info());
        let mut sans = Vec::new();
        for extension in request.requested_extensions().unwrap() {
            if let x509_parser::extensions::ParsedExtension::SubjectAlternativeName(san) = extension
            {
                for name in &san.general_names {
                    sans.push(match name {
                        x509_parser::extensions::GeneralName::DNSName(dns) => dns.to_string(),
                        x509_parser::extensions::GeneralName::IPAddress(ip) => {
                            format!("{ip:?}")
                        }
                        other => panic!("unexpected name {other:?}"),
                    });
                }
            }
        }
        assert_eq!(
            sans,
            [
                "[169, 254, 2, 1]",
                "[127, 0, 0, 1]",
                "edge-1",
                "kubernetes.default.svc"
            ]
        );
    }

    #[test]
    fn a_node_subject_asks_kubelets_signer_and_others_yurthubs() {
        assert_eq!(signer_for(&organizations(&[])), KUBELET_CLIENT_SIGNER);
        let yurthub = organizations(&["openyurt:yurthub".to_owned()]);
        assert_eq!(signer_for(&yurthub), CLIENT_SIGNER);
        let csr = csr_object(b"der", KUBELET_CLIENT_SIGNER, &CLIENT_USAGES);
        assert_eq!(csr.spec.signer_name, KUBELET_CLIENT_SIGNER);
        assert_eq!(csr.spec.usages.unwrap(), CLIENT_USAGES);
        let text = String::from_utf8(csr.spec.request.0).unwrap();
        assert!(
            text.starts_with("-----BEGIN CERTIFICATE REQUEST-----\nZGVy\n"),
            "{text}"
        );
    }
}
