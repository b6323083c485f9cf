//! The certificate manager against the real thing: kube-apiserver with bootstrap-token
//! authentication, kube-controller-manager's approver, signer and bootstrapsigner, and the
//! objects `kubeadm init` creates for joining nodes. The test approves the HTTPS proxy's
//! serving certificate as OpenYurt's yurt-manager does (kube-controller-manager signs
//! `kubelet-serving` requests but approves none).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, ensure};
use edgegate_testkit::bootstrap::{self, BootstrapToken, SERVING_SIGNER};
use edgegate_testkit::cluster::{ADMIN_TOKEN, ClusterOptions, User};
use edgegate_testkit::process::{free_port, wait_until};
use edgegate_testkit::{Cluster, Gateway, controller_manager, http};
use rustls::pki_types::pem::PemObject;
use x509_parser::prelude::FromDer;

use crate::support::Env;

const NODE: &str = "edge-joiner";
/// The certificates' lifetime. kube-controller-manager 1.20 backdates notBefore by 5 minutes
/// and ends the lifetime that long after it: 8 minutes leave 3 of use, renewed at 70–90 %
/// (36–132 s after issue), at least 48 s before the old certificate expires.
const SIGNING_DURATION: &str = "8m";
const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// A gateway given only a join token (and the CA pin) comes up: it finds the CA in
/// cluster-info, its request is approved and signed by kube-controller-manager, and it
/// serves on the node's identity. Its HTTPS proxy's serving certificate is requested on
/// that identity and, once approved, served (a client trusting only the cluster CA
/// connects to 127.0.0.1). `/v1/token` takes a new bootstrap token. Restarted, it keeps
/// its certificates (no new request).
/// Under a continuous load of requests on its identity, the certificate is renewed before
/// it expires, with the same process and not one failed request, past the old
/// certificate's expiry.
pub fn a_join_token_is_enough_and_the_certificate_rotates_under_load(env: &Env) -> Result<()> {
    let options = ClusterOptions {
        node: Some(NODE.to_owned()),
        bootstrap_token_auth: true,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with(&env.tools, env.etcd.clone(), options)?;
    let extra = [
        "--controllers=csrapproving,csrsigning,bootstrapsigner".to_owned(),
        format!("--cluster-signing-duration={SIGNING_DURATION}"),
    ];
    let mut kcm = controller_manager::start(&cluster, &extra)?;
    let token = BootstrapToken::random("edge01");
    bootstrap::seed(&cluster, &token).or_else(|e| kcm.check_running().and(Err(e)))?;

    let root = cluster.dir.join("yurthub-root");
    let secure = free_port()?;
    let flags = [
        format!("--join-token={}", token.join_token()),
        format!(
            "--discovery-token-ca-cert-hash={}",
            bootstrap::ca_pin(&cluster)?
        ),
        format!("--node-name={NODE}"),
        format!("--root-dir={}", root.display()),
        format!("--proxy-secure-port={secure}"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut gateway = Gateway::start_without_kubeconfig(&env.bin, &cluster, &flags)?;

    // Issued by the cluster's signer to the node, kept privately.
    let current = root.join("pki/yurthub-current.pem");
    let first = std::fs::read_link(&current).context("the current pair is a symlink")?;
    let leaf = Leaf::read(&current)?;
    ensure!(
        leaf.subject == format!("CN=system:node:{NODE}, O=system:nodes")
            || leaf.subject == format!("O=system:nodes, CN=system:node:{NODE}"),
        "subject {}",
        leaf.subject
    );
    let pki = root.join("pki");
    ensure!(
        first.is_relative() && mode(&pki.join(&first))? == 0o600,
        "pair {} mode {:o}",
        first.display(),
        mode(&pki.join(&first))?
    );
    ensure!(
        mode(&root.join("pki"))? == 0o700,
        "pki mode {:o}",
        mode(&root.join("pki"))?
    );
    let requests = csrs(&cluster, CLIENT_SIGNER)?;
    ensure!(
        requests.len() == 1,
        "{requests:?}\n{}",
        gateway.log_tail(40)
    );
    ensure!(
        requests[0].1 == format!("system:bootstrap:{}", token.id),
        "{requests:?}"
    );
    // On the node's identity: a node may list nodes, not secrets (nor may anonymous callers
    // list nodes).
    let can_i = |args: &[&str]| {
        std::process::Command::new(&env.tools.kubectl)
            .arg("--kubeconfig")
            .arg(&gateway.anonymous_kubeconfig)
            .args(["auth", "can-i"])
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    ensure!(can_i(&["list", "nodes"])? == "yes", "list nodes");
    let secrets = can_i(&["list", "secrets", "-A"])?;
    ensure!(secrets.starts_with("no"), "list secrets: {secrets}");

    serving_certificate_is_requested_approved_and_served(env, &cluster, &gateway, &root, secure)?;
    join_token_is_updated(&gateway, &root, &token)?;

    let serving = std::fs::read_link(root.join("pki/yurthub-server-current.pem"))?;
    gateway.restart()?;
    ensure!(
        std::fs::read_link(&current)? == first,
        "the pair was replaced at restart"
    );
    ensure!(
        std::fs::read_link(root.join("pki/yurthub-server-current.pem"))? == serving,
        "the serving pair was replaced at restart"
    );
    // (The serving certificate may already be due for renewal: its lifetime here is short.)
    ensure!(
        csrs(&cluster, CLIENT_SIGNER)?.len() == 1,
        "a new request at restart"
    );

    let pid = gateway.process().context("running")?.pid();
    let load = Load::start(gateway.proxy);
    let renewed = wait_until(
        Duration::from_secs(300),
        "the certificate to be renewed",
        || std::fs::read_link(&current).is_ok_and(|target| target != first),
    );
    renewed.with_context(|| gateway.log_tail(30))?;
    let renewed_at = SystemTime::now();
    let renewed_leaf = Leaf::read(&current)?;
    ensure!(renewed_leaf.serial != leaf.serial, "same certificate");
    let lifetime = leaf.not_after.duration_since(leaf.not_before)?;
    let renewed_after = renewed_at.duration_since(leaf.not_before)?;
    // Not before 70 % of the lifetime; and before the end, however slow the signer (the
    // deadline's upper bound, 90 %, is pinned by the unit tests, not by a clock here).
    ensure!(
        renewed_after >= lifetime.mul_f64(0.7) && renewed_after < lifetime,
        "renewed {renewed_after:?} into a lifetime of {lifetime:?}"
    );
    // Past the old certificate's end: requests only succeed on the new one.
    let past_expiry = leaf.not_after + Duration::from_secs(5);
    while SystemTime::now() < past_expiry {
        std::thread::sleep(Duration::from_millis(200));
    }
    let (sent, failed) = load.stop();
    eprintln!(
        "rotation under load: {sent} requests, {} failed",
        failed.len()
    );
    ensure!(sent > 100, "only {sent} requests");
    ensure!(
        failed.is_empty(),
        "{} of {sent} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    ensure!(
        gateway.process().context("running")?.pid() == pid,
        "restarted"
    );
    // The bootstrap's request, then renewals on the node's own identity: one, or more when
    // a renewed certificate (whose start kube-controller-manager backdates) fell due again
    // before the old one ran out.
    let requests = csrs(&cluster, CLIENT_SIGNER)?;
    let node = (CLIENT_SIGNER.to_owned(), format!("system:node:{NODE}"));
    let bootstrap = requests
        .iter()
        .filter(|r| r.1.starts_with("system:bootstrap:"))
        .count();
    let renewals = requests.iter().filter(|r| **r == node).count();
    ensure!(
        bootstrap == 1 && renewals >= 1 && bootstrap + renewals == requests.len(),
        "the renewal is the node's own request: {requests:?}"
    );
    Ok(())
}

/// The node's serving request: made on its own identity, left pending by
/// kube-controller-manager (no HTTPS until it is issued); approved, it is signed by the
/// cluster's CA for the proxy's names and served.
fn serving_certificate_is_requested_approved_and_served(
    env: &Env,
    cluster: &Cluster,
    gateway: &Gateway,
    root: &Path,
    secure: u16,
) -> Result<()> {
    let pending = || bootstrap::pending_serving_requests(cluster, NODE);
    wait_until(Duration::from_secs(60), "the serving request", || {
        pending().is_ok_and(|p| !p.is_empty())
    })
    .with_context(|| gateway.log_tail(30))?;
    let requests = csrs(cluster, SERVING_SIGNER)?;
    ensure!(
        requests == [(SERVING_SIGNER.to_owned(), format!("system:node:{NODE}"))],
        "{requests:?}"
    );
    let kubeconfig = gateway.dir.join("secure.kubeconfig");
    let url = format!("https://127.0.0.1:{secure}");
    cluster.kubeconfig_for(&kubeconfig, &url, &User::Token(ADMIN_TOKEN))?;
    let through_https = || {
        edgegate_testkit::cluster::kubectl(
            &env.tools,
            &kubeconfig,
            &[
                "--request-timeout=10s",
                "get",
                "--raw",
                "/api/v1/namespaces/kube-system",
            ],
        )
    };
    let before = through_https();
    ensure!(before.is_err(), "served before issued: {before:?}");

    for name in pending()? {
        cluster.kubectl(&["certificate", "approve", &name])?;
    }
    let pair = root.join("pki/yurthub-server-current.pem");
    wait_until(Duration::from_secs(60), "the serving pair", || {
        pair.exists()
    })
    .with_context(|| gateway.log_tail(30))?;
    let leaf = Leaf::read(&pair)?;
    ensure!(
        leaf.subject.contains(&format!("CN=system:node:{NODE}"))
            && leaf.subject.contains("O=system:nodes"),
        "subject {}",
        leaf.subject
    );
    for name in ["127.0.0.1", NODE, "kubernetes.default.svc"] {
        ensure!(
            leaf.names.iter().any(|n| n == name),
            "{name} not in {:?}",
            leaf.names
        );
    }
    ensure!(
        mode(&root.join("pki").join(std::fs::read_link(&pair)?))? == 0o600,
        "serving pair mode"
    );
    // Trusting only the cluster CA, verifying 127.0.0.1.
    wait_until(
        Duration::from_secs(30),
        "HTTPS with the issued certificate",
        || through_https().is_ok_and(|out| out.contains("\"kube-system\"")),
    )
    .with_context(|| format!("{:?}\n{}", through_https(), gateway.log_tail(30)))?;
    Ok(())
}

/// `/v1/token` rewrites the bootstrap kubeconfig with a new token; a body without one is a
/// `400`.
fn join_token_is_updated(gateway: &Gateway, root: &Path, token: &BootstrapToken) -> Result<()> {
    let post = |body: &str| {
        let request = format!(
            "POST /v1/token HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        http::raw_exchange(gateway.hub, request.as_bytes(), Duration::from_secs(10))
    };
    let empty = post("{}")?;
    ensure!(empty.status == 400, "{} {}", empty.status, empty.body);
    let bad = post(r#"{"jointoken": "nope"}"#)?;
    ensure!(bad.status == 400, "{} {}", bad.status, bad.body);
    let fresh = BootstrapToken::random("edge02");
    ensure!(fresh.join_token() != token.join_token(), "the same token");
    let updated = post(&format!(r#"{{"jointoken": "{}"}}"#, fresh.join_token()))?;
    ensure!(updated.status == 200, "{} {}", updated.status, updated.body);
    let written = std::fs::read_to_string(root.join("bootstrap-hub.conf"))?;
    ensure!(
        written.contains(&fresh.join_token()) && !written.contains(&token.join_token()),
        "bootstrap-hub.conf not rewritten"
    );
    ensure!(
        mode(&root.join("bootstrap-hub.conf"))? == 0o600,
        "bootstrap-hub.conf mode"
    );
    Ok(())
}

/// The certificate of a pair file.
struct Leaf {
    subject: String,
    /// Its subject alternative names (IP addresses as text).
    names: Vec<String>,
    serial: Vec<u8>,
    not_before: SystemTime,
    not_after: SystemTime,
}

impl Leaf {
    fn read(path: &Path) -> Result<Leaf> {
        let pem = std::fs::read(path)?;
        let der = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
            .next()
            .context("no certificate")??;
        let (_, cert) = x509_parser::certificate::X509Certificate::from_der(&der)?;
        let time = |t: x509_parser::time::ASN1Time| {
            SystemTime::UNIX_EPOCH + Duration::from_secs(t.timestamp().unsigned_abs())
        };
        let mut names = Vec::new();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    x509_parser::extensions::GeneralName::DNSName(dns) => {
                        names.push((*dns).to_owned());
                    }
                    x509_parser::extensions::GeneralName::IPAddress(ip) => {
                        if let Ok(v4) = <[u8; 4]>::try_from(*ip) {
                            names.push(std::net::Ipv4Addr::from(v4).to_string());
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(Leaf {
            subject: cert.subject().to_string(),
            names,
            serial: cert.raw_serial().to_vec(),
            not_before: time(cert.validity().not_before),
            not_after: time(cert.validity().not_after),
        })
    }
}

fn mode(path: &Path) -> Result<u32> {
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o777)
}

/// Each CSR to `signer`: its signer and requesting user.
fn csrs(cluster: &Cluster, signer: &str) -> Result<Vec<(String, String)>> {
    Ok(bootstrap::csrs(cluster)?
        .iter()
        .filter(|csr| csr["spec"]["signerName"] == signer)
        .map(|csr| {
            let field = |name: &str| csr["spec"][name].as_str().unwrap_or_default().to_owned();
            (field("signerName"), field("username"))
        })
        .collect())
}

/// Requests on the gateway's own identity, one after another, until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    thread: std::thread::JoinHandle<Vec<String>>,
}

impl Load {
    fn start(proxy: std::net::SocketAddr) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (stop, sent) = (stop.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut failed = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let at = humantime_now();
                    match http::get(proxy, &format!("/api/v1/nodes/{NODE}")) {
                        // The node object does not exist: 404 is the apiserver's answer to
                        // the node's identity (anonymous would be 403, a bad certificate 401).
                        Ok(r) if r.status == 404 => {}
                        Ok(r) => failed.push(format!(
                            "{at}: {} {}",
                            r.status,
                            r.body.chars().take(200).collect::<String>()
                        )),
                        Err(e) => failed.push(format!("{at}: {e:#}")),
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(20));
                }
                failed
            })
        };
        Load { stop, sent, thread }
    }

    /// Stops; how many requests were sent, and the failures.
    fn stop(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let failed = self
            .thread
            .join()
            .unwrap_or_else(|_| vec!["the load thread panicked".to_owned()]);
        (self.sent.load(Ordering::Relaxed), failed)
    }
}

fn humantime_now() -> String {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:03}", since.as_secs(), since.subsec_millis())
}
