use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use rustls::pki_types::ServerName;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A CA that issues the test's certificates.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = name("test-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Ca { issuer }
    }

    fn roots(&self) -> Arc<RootCertStore> {
        let mut roots = RootCertStore::empty();
        roots.add(self.issuer.der().clone()).unwrap();
        Arc::new(roots)
    }

    /// A certificate for `cn` (a client's, or a server's for `localhost`): PEM cert, PEM key.
    fn issue(&self, cn: &str, server: bool) -> (String, String) {
        let names = if server {
            vec!["localhost".to_owned()]
        } else {
            Vec::new()
        };
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name = name(cn);
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Writes `pem` to a new file in `dir` and points the symlink `link` at it, as kubelet
/// rotates `kubelet-client-current.pem`.
fn rotate(dir: &Path, link: &str, version: &str, pem: &str) {
    let file = dir.join(format!("{link}-{version}"));
    std::fs::write(&file, pem).unwrap();
    let staged = dir.join(format!(".{link}.tmp"));
    std::os::unix::fs::symlink(&file, &staged).unwrap();
    std::fs::rename(&staged, dir.join(link)).unwrap();
}

/// One TLS handshake over an in-memory pipe; returns the end-entity certificates each side
/// presented: (the client's, the server's).
async fn handshake(
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
) -> (CertificateDer<'static>, CertificateDer<'static>) {
    let (near, far) = tokio::io::duplex(64 << 10);
    let acceptor = tokio_rustls::TlsAcceptor::from(server);
    let connector = tokio_rustls::TlsConnector::from(client);
    let serve = tokio::spawn(async move {
        let mut tls = acceptor.accept(far).await.unwrap();
        let presented = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
        tls.write_all(b"ok").await.unwrap();
        tls.shutdown().await.unwrap();
        presented
    });
    let localhost = ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(localhost, near).await.unwrap();
    let served = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let mut answer = Vec::new();
    tls.read_to_end(&mut answer).await.unwrap();
    assert_eq!(answer, b"ok");
    (serve.await.unwrap(), served)
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

#[tokio::test]
async fn rotated_files_are_presented_at_the_next_handshake_and_a_broken_pair_is_not() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    let (client_a, client_a_key) = ca.issue("node-a", false);
    let (client_b, client_b_key) = ca.issue("node-b", false);
    let (client_c, client_c_key) = ca.issue("node-c", false);
    let (server_a, server_a_key) = ca.issue("gateway-a", true);
    let (server_b, server_b_key) = ca.issue("gateway-b", true);
    // The client's pair in one file behind a symlink, as kubelet keeps it; the server's in two.
    rotate(
        dir.path(),
        "client.pem",
        "1",
        &format!("{client_a}{client_a_key}"),
    );
    rotate(dir.path(), "server.crt", "1", &server_a);
    rotate(dir.path(), "server.key", "1", &server_a_key);

    let client_files = Arc::new(
        CertFiles::load(
            &dir.path().join("client.pem"),
            &dir.path().join("client.pem"),
            provider(),
        )
        .unwrap()
        .checked_every(Duration::ZERO),
    );
    let mut client = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(ca.roots())
        .with_no_client_auth();
    client.client_auth_cert_resolver = client_files.clone();
    // Every handshake in full: a resumed session presents no certificates (the transport
    // starts a new session store at a rotation for that reason).
    client.resumption = rustls::client::Resumption::disabled();
    let client = Arc::new(client);
    let server_files = CertFiles::load(
        &dir.path().join("server.crt"),
        &dir.path().join("server.key"),
        provider(),
    )
    .unwrap()
    .checked_every(Duration::ZERO);
    let verifier = WebPkiClientVerifier::builder_with_provider(ca.roots(), provider())
        .build()
        .unwrap();
    let server = Arc::new(
        ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(Arc::new(server_files)),
    );

    let first = handshake(client.clone(), server.clone()).await;
    assert_eq!(first, (der(&client_a), der(&server_a)));
    assert_eq!(client_files.generation(), 0);

    rotate(
        dir.path(),
        "client.pem",
        "2",
        &format!("{client_b}{client_b_key}"),
    );
    rotate(dir.path(), "server.crt", "2", &server_b);
    rotate(dir.path(), "server.key", "2", &server_b_key);
    let rotated = handshake(client.clone(), server.clone()).await;
    assert_eq!(rotated, (der(&client_b), der(&server_b)));
    assert_eq!(client_files.generation(), 1);

    // A certificate whose key is not there yet keeps the pair in use.
    rotate(
        dir.path(),
        "client.pem",
        "3",
        &format!("{client_c}{client_b_key}"),
    );
    let half = handshake(client.clone(), server.clone()).await;
    assert_eq!(half.0, der(&client_b));
    rotate(dir.path(), "client.pem", "4", &client_c);
    let keyless = handshake(client.clone(), server.clone()).await;
    assert_eq!(keyless.0, der(&client_b));
    assert_eq!(client_files.generation(), 1);
    // Once the pair is whole, it is used.
    rotate(
        dir.path(),
        "client.pem",
        "5",
        &format!("{client_c}{client_c_key}"),
    );
    let whole = handshake(client, server).await;
    assert_eq!(whole.0, der(&client_c));
    assert_eq!(client_files.generation(), 2);
}

#[test]
fn the_files_are_not_looked_at_more_often_than_asked() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    let (a, a_key) = ca.issue("a", false);
    let (b, b_key) = ca.issue("b", false);
    rotate(dir.path(), "pair.pem", "1", &format!("{a}{a_key}"));
    let path = dir.path().join("pair.pem");
    let files = CertFiles::load(&path, &path, provider())
        .unwrap()
        .checked_every(Duration::from_secs(3600));
    rotate(dir.path(), "pair.pem", "2", &format!("{b}{b_key}"));
    assert_eq!(files.current().unwrap().cert[0], der(&a));
}

#[test]
fn a_pair_not_issued_yet_is_used_once_it_is_there() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serving.pem");
    let files = CertFiles::load_when_there(&path, &path, provider()).checked_every(Duration::ZERO);
    assert!(files.current().is_none());
    // Half written: still none.
    let (cert, key) = ca.issue("edge", true);
    std::fs::write(&path, &cert).unwrap();
    assert!(files.current().is_none());
    rotate(dir.path(), "serving.pem", "1", &format!("{cert}{key}"));
    assert_eq!(files.current().unwrap().cert[0], der(&cert));
    assert_eq!(files.generation(), 1);
}
