//! The test cluster's PKI: a CA, the apiserver's serving certificate, client certificates and
//! the service-account key pair, written as PEM files into the cluster directory.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

/// Paths of the PEM files the cluster is started with.
#[derive(Clone, Debug)]
pub struct Pki {
    /// The CA certificate every party trusts.
    pub ca_cert: PathBuf,
    /// The CA's key (kube-controller-manager signs CSRs with it).
    pub ca_key: PathBuf,
    /// The apiserver's serving certificate (IP SAN 127.0.0.1, and the addresses asked for).
    pub serving_cert: PathBuf,
    /// Its key.
    pub serving_key: PathBuf,
    /// The service-account signing key.
    pub sa_key: PathBuf,
    /// Its public half.
    pub sa_pub: PathBuf,
    /// The gateway's client certificate: CN `edgegate`, group `system:masters`.
    pub gateway_cert: PathBuf,
    /// Its key.
    pub gateway_key: PathBuf,
    /// Another client certificate, as a rotation might bring: CN `edgegate-rotated`, no
    /// group (so RBAC gives it next to nothing).
    pub rotated_cert: PathBuf,
    /// Its key.
    pub rotated_key: PathBuf,
    /// A serving certificate for the gateway's HTTPS proxy (IP SANs 127.0.0.1 and the hub
    /// interface's default 169.254.2.1), from the CA.
    pub gateway_serving_cert: PathBuf,
    /// Its key.
    pub gateway_serving_key: PathBuf,
    /// A node's client certificate (CN `system:node:<node>`, group `system:nodes`) and key,
    /// when one was asked for.
    pub node: Option<(PathBuf, PathBuf)>,
}

impl Pki {
    /// Generates the PKI into `dir`.
    pub fn generate(dir: &Path) -> Result<Pki> {
        Pki::generate_for(dir, &[], None)
    }

    /// Generates the PKI into `dir`, the apiserver's certificate also valid for `ips`, and a
    /// client certificate for `node` if given.
    pub fn generate_for(dir: &Path, ips: &[String], node: Option<&str>) -> Result<Pki> {
        fs::create_dir_all(dir)?;
        let write = |name: &str, pem: String| -> Result<PathBuf> {
            let path = dir.join(name);
            fs::write(&path, pem).with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        };

        let ca_params = ca_params()?;
        let ca_key_pair = KeyPair::generate()?;
        let ca_key = write("ca.key", ca_key_pair.serialize_pem())?;
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key_pair)?;
        let ca_cert = write("ca.crt", ca.pem())?;

        let mut names = vec![
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default.svc".to_owned(),
        ];
        names.extend(ips.iter().cloned());
        let mut serving = CertificateParams::new(names)?;
        serving.distinguished_name = name("kube-apiserver", None);
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_key_pair = KeyPair::generate()?;
        let serving_cert = serving.signed_by(&serving_key_pair, &ca)?;
        let serving_cert = write("apiserver.crt", serving_cert.pem())?;
        let serving_key = write("apiserver.key", serving_key_pair.serialize_pem())?;

        let mut client = CertificateParams::new(Vec::<String>::new())?;
        client.distinguished_name = name("edgegate", Some("system:masters"));
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key_pair = KeyPair::generate()?;
        let client_cert = client.signed_by(&client_key_pair, &ca)?;
        let gateway_cert = write("gateway.crt", client_cert.pem())?;
        let gateway_key = write("gateway.key", client_key_pair.serialize_pem())?;

        let mut rotated = CertificateParams::new(Vec::<String>::new())?;
        rotated.distinguished_name = name("edgegate-rotated", None);
        rotated.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let rotated_key_pair = KeyPair::generate()?;
        let rotated_signed = rotated.signed_by(&rotated_key_pair, &ca)?;
        let rotated_cert = write("rotated.crt", rotated_signed.pem())?;
        let rotated_key = write("rotated.key", rotated_key_pair.serialize_pem())?;

        let mut gateway_serving =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "169.254.2.1".to_owned()])?;
        gateway_serving.distinguished_name = name("edgegate", None);
        gateway_serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let gateway_serving_pair = KeyPair::generate()?;
        let gateway_serving_signed = gateway_serving.signed_by(&gateway_serving_pair, &ca)?;
        let gateway_serving_cert = write("gateway-serving.crt", gateway_serving_signed.pem())?;
        let gateway_serving_key =
            write("gateway-serving.key", gateway_serving_pair.serialize_pem())?;

        let node = match node {
            Some(node) => {
                let mut params = CertificateParams::new(Vec::<String>::new())?;
                params.distinguished_name =
                    name(&format!("system:node:{node}"), Some("system:nodes"));
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
                let pair = KeyPair::generate()?;
                let cert = params.signed_by(&pair, &ca)?;
                Some((
                    write("node.crt", cert.pem())?,
                    write("node.key", pair.serialize_pem())?,
                ))
            }
            None => None,
        };

        let sa = KeyPair::generate()?;
        let sa_key = write("sa.key", sa.serialize_pem())?;
        let sa_pub = write("sa.pub", sa.public_key_pem())?;

        Ok(Pki {
            ca_cert,
            ca_key,
            serving_cert,
            serving_key,
            sa_key,
            sa_pub,
            gateway_cert,
            gateway_key,
            rotated_cert,
            rotated_key,
            gateway_serving_cert,
            gateway_serving_key,
            node,
        })
    }
}

/// A node's client certificate and its serving certificate, issued by the cluster's CA.
#[derive(Clone, Debug)]
pub struct NodePki {
    /// Client certificate: CN `system:node:<node>`, group `system:nodes`.
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
    /// Serving certificate for the node's addresses.
    pub serving_cert: PathBuf,
    /// Its key.
    pub serving_key: PathBuf,
}

impl Pki {
    /// Issues into `dir` node `node`'s client certificate and a serving certificate for
    /// `ips`, signed by this PKI's CA.
    pub fn issue_node(&self, dir: &Path, node: &str, ips: &[String]) -> Result<NodePki> {
        fs::create_dir_all(dir)?;
        let ca_params = ca_params()?;
        let ca_key = KeyPair::from_pem(&fs::read_to_string(&self.ca_key)?)?;
        let ca = rcgen::Issuer::from_params(&ca_params, ca_key);
        let issue = |params: CertificateParams, file: &str| -> Result<(PathBuf, PathBuf)> {
            let pair = KeyPair::generate()?;
            let cert = params.signed_by(&pair, &ca)?;
            let (cert_path, key_path) = (
                dir.join(format!("{file}.crt")),
                dir.join(format!("{file}.key")),
            );
            fs::write(&cert_path, cert.pem())?;
            fs::write(&key_path, pair.serialize_pem())?;
            Ok((cert_path, key_path))
        };
        let mut client = CertificateParams::new(Vec::<String>::new())?;
        client.distinguished_name = name(&format!("system:node:{node}"), Some("system:nodes"));
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let (client_cert, client_key) = issue(client, &format!("{node}-client"))?;
        let mut serving = CertificateParams::new(ips.to_vec())?;
        serving.distinguished_name = name(&format!("system:node:{node}"), Some("system:nodes"));
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let (serving_cert, serving_key) = issue(serving, &format!("{node}-serving"))?;
        Ok(NodePki {
            client_cert,
            client_key,
            serving_cert,
            serving_key,
        })
    }
}

/// The CA's parameters: the issuer of every certificate of the PKI.
fn ca_params() -> Result<CertificateParams> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name = name("edgegate-test-ca", None);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca_params)
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}
