//! A real OCI registry for tests: Debian's docker-registry (distribution 2.8) on loopback,
//! serving TLS from a CA of its own (not the cluster's) and asking for htpasswd basic auth.

use std::fs;
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

use crate::process::{Process, free_port, wait_until};

/// Where Debian's docker-registry package installs distribution's registry.
const PROGRAM: &str = "/usr/bin/docker-registry";

/// The one user the registry's htpasswd file holds.
const USERNAME: &str = "edgegate";

/// How long a start may take before it counts as failed; it takes well under a second.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A docker-registry on loopback: TLS from its own CA, htpasswd auth, storage in a scratch dir.
#[derive(Debug)]
pub struct Registry {
    /// `127.0.0.1:PORT`, as an image reference's host part.
    pub host: String,
    /// The PEM CA that signed the registry's serving certificate.
    pub ca_cert: PathBuf,
    /// The user the registry accepts.
    pub username: String,
    /// That user's password.
    pub password: String,
    /// A Docker `config.json` with `{"auths": {"127.0.0.1:PORT": {"auth": base64(user:pass)}}}`
    /// (what `kubectl create secret docker-registry` holds as `.dockerconfigjson`).
    pub auth_file: PathBuf,
    config: PathBuf,
    storage: PathBuf,
    log: PathBuf,
    process: Option<Process>,
}

impl Registry {
    /// Starts one with its files under `dir` (created), on a port from
    /// [`free_port`]; returns once `GET https://HOST/v2/` answers 401 without
    /// credentials and 200 with them.
    pub fn start(dir: &Path) -> Result<Registry> {
        ensure!(
            Path::new(PROGRAM).exists(),
            "{PROGRAM} is missing: install Debian's docker-registry (tests/cluster/provision.sh)"
        );
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let host = format!("127.0.0.1:{}", free_port()?);
        let password = random_hex(16)?;
        let tls = Tls::issue(dir)?;
        let htpasswd = write(dir, "htpasswd", htpasswd_entry(USERNAME, &password)?)?;
        let storage = dir.join("storage");
        let config = Config {
            host: &host,
            storage: &storage,
            tls: &tls,
            htpasswd: &htpasswd,
            secret: &random_hex(16)?,
        };
        let config = write(dir, "config.yml", config.yaml()?)?;
        let auth_file = write(
            dir,
            "docker-config.json",
            docker_config(&host, USERNAME, &password)?,
        )?;
        let mut registry = Registry {
            host,
            ca_cert: tls.ca_cert,
            username: USERNAME.to_owned(),
            password,
            auth_file,
            config,
            storage,
            log: dir.join("registry.log"),
            process: None,
        };
        registry.run()?;
        Ok(registry)
    }

    /// Stops the process (the registry is down; its storage is kept).
    pub fn stop(&mut self) -> Result<()> {
        if let Some(mut process) = self.process.take() {
            // Without `http.draintimeout` distribution exits on SIGTERM at once.
            process.terminate(Duration::from_secs(5));
        }
        wait_until(
            Duration::from_secs(10),
            "the registry's port to close",
            || TcpStream::connect(&self.host).is_err(),
        )
    }

    /// Starts it again on the same port with the same storage, and waits as `start` does.
    pub fn restart(&mut self) -> Result<()> {
        self.stop()?;
        self.run()
    }

    /// The file the registry stores blob `digest` ("sha256:HEX") in (distribution's
    /// filesystem driver: `ROOT/docker/registry/v2/blobs/sha256/HE/HEX/data`), for a test to
    /// corrupt it.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let (algorithm, hex) = digest.split_once(':').expect("a digest is ALGORITHM:HEX");
        let prefix = hex.get(..2).expect("a digest's hex is longer than 2");
        self.storage
            .join("docker/registry/v2/blobs")
            .join(algorithm)
            .join(prefix)
            .join(hex)
            .join("data")
    }

    /// Spawns the process and waits until it serves `/v2/` with auth.
    fn run(&mut self) -> Result<()> {
        let args = ["serve".to_owned(), path_str(&self.config)?.to_owned()];
        let mut process = Process::spawn("docker-registry", Path::new(PROGRAM), &args, &self.log)?;
        let ready = wait_until(READY_TIMEOUT, "docker-registry /v2/", || {
            process.is_running()
                && self.v2_status(false) == Some(401)
                && self.v2_status(true) == Some(200)
        });
        if let Err(error) = ready {
            process.check_running()?;
            return Err(error.context(process.log_tail(30)));
        }
        self.process = Some(process);
        Ok(())
    }

    /// The status `GET /v2/` answers, trusting only the registry's CA; `None` when no answer.
    fn v2_status(&self, credentials: bool) -> Option<u16> {
        let mut curl = Command::new("curl");
        curl.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "5"])
            .arg("--cacert")
            .arg(&self.ca_cert);
        if credentials {
            curl.arg("-u")
                .arg(format!("{}:{}", self.username, self.password));
        }
        let out = curl
            .arg(format!("https://{}/v2/", self.host))
            .output()
            .ok()?;
        // curl prints 000 when nothing answered.
        String::from_utf8(out.stdout)
            .ok()?
            .parse()
            .ok()
            .filter(|&code| code != 0)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The registry's own CA and the serving certificate it signed, as PEM files.
struct Tls {
    ca_cert: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Tls {
    /// A fresh CA (its key is not kept) and a serving certificate for 127.0.0.1 and
    /// localhost, written into `dir`.
    fn issue(dir: &Path) -> Result<Tls> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name = common_name("edgegate-test-registry-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
        let mut serving =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?;
        serving.distinguished_name = common_name("edgegate-test-registry");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let cert = serving.signed_by(&key, &ca)?;
        Ok(Tls {
            ca_cert: write(dir, "ca.crt", ca.pem())?,
            cert: write(dir, "registry.crt", cert.pem())?,
            key: write(dir, "registry.key", key.serialize_pem())?,
        })
    }
}

/// What the registry's `config.yml` is made of.
struct Config<'a> {
    host: &'a str,
    storage: &'a Path,
    tls: &'a Tls,
    htpasswd: &'a Path,
    secret: &'a str,
}

impl Config<'_> {
    /// The YAML. Nothing in it reaches beyond loopback: no notifications, no proxy, no
    /// reporting; the storage health check is off so it logs nothing every 10 s. A fixed
    /// `http.secret` keeps an upload started before a restart valid after it.
    fn yaml(&self) -> Result<String> {
        Ok(format!(
            "version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: {host}
  secret: {secret}
  tls:
    certificate: {cert}
    key: {key}
auth:
  htpasswd:
    realm: edgegate-test-registry
    path: {htpasswd}
health:
  storagedriver:
    enabled: false
",
            storage = quoted(self.storage)?,
            host = self.host,
            secret = serde_json::to_string(self.secret)?,
            cert = quoted(&self.tls.cert)?,
            key = quoted(&self.tls.key)?,
            htpasswd = quoted(self.htpasswd)?,
        ))
    }
}

/// `user:BCRYPT` for an htpasswd file, from `htpasswd -Bbn`.
fn htpasswd_entry(user: &str, password: &str) -> Result<String> {
    let out = Command::new("htpasswd")
        .args(["-Bbn", user, password])
        .output()
        .context("running htpasswd (Debian's apache2-utils)")?;
    ensure!(
        out.status.success(),
        "htpasswd failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // htpasswd -n ends its line with a blank one.
    Ok(format!("{}\n", String::from_utf8(out.stdout)?.trim()))
}

/// A Docker `config.json` holding the credentials for `host`.
fn docker_config(host: &str, user: &str, password: &str) -> Result<String> {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let config = serde_json::json!({ "auths": { host: { "auth": auth } } });
    Ok(serde_json::to_string_pretty(&config)?)
}

/// `bytes` random bytes from the kernel, in hex.
fn random_hex(bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `text` to `dir/name`.
fn write(dir: &Path, name: &str, text: String) -> Result<PathBuf> {
    let path = dir.join(name);
    fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// A path as a YAML double-quoted string (JSON's escapes are YAML's).
fn quoted(path: &Path) -> Result<String> {
    Ok(serde_json::to_string(path_str(path)?)?)
}

/// A path as the `&str` a config file or argument needs.
fn path_str(path: &Path) -> Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}

/// A distinguished name of just a CN.
fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

#[cfg(test)]
mod tests {
    use std::process::Output;
    use std::time::Instant;

    use sha2::{Digest, Sha256};

    use super::*;

    /// curl trusting only the registry's CA, as its user when `credentials`.
    fn curl(registry: &Registry, credentials: bool, args: &[&str]) -> Output {
        let mut curl = Command::new("curl");
        curl.args(["-sS", "-m", "10", "--cacert"])
            .arg(&registry.ca_cert);
        if credentials {
            curl.arg("-u")
                .arg(format!("{}:{}", registry.username, registry.password));
        }
        curl.args(args).output().unwrap()
    }

    fn url(registry: &Registry, path: &str) -> String {
        format!("https://{}{path}", registry.host)
    }

    fn status(registry: &Registry, credentials: bool, path: &str) -> String {
        let out = curl(
            registry,
            credentials,
            &[
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                &url(registry, path),
            ],
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// POSTs a blob upload and PUTs `blob` to its `Location`; returns the blob's digest.
    fn push_blob(registry: &Registry, blob: &[u8], scratch: &Path) -> String {
        let digest = format!("sha256:{:x}", Sha256::digest(blob));
        let post = curl(
            registry,
            true,
            &[
                "-X",
                "POST",
                "-D",
                "-",
                "-o",
                "/dev/null",
                &url(registry, "/v2/test/x/blobs/uploads/"),
            ],
        );
        let head = String::from_utf8(post.stdout).unwrap();
        // The registry speaks HTTP/2 to curl: the status line is `HTTP/2 202`.
        let status = head.split_whitespace().nth(1);
        assert_eq!(status, Some("202"), "POST answered:\n{head}");
        let location = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("location")
                    .then(|| value.trim().to_owned())
            })
            .unwrap();
        let location = if location.starts_with('/') {
            url(registry, &location)
        } else {
            location
        };
        let separator = if location.contains('?') { '&' } else { '?' };
        let body = scratch.join("blob");
        fs::write(&body, blob).unwrap();
        let put = curl(
            registry,
            true,
            &[
                "-X",
                "PUT",
                "-H",
                "Content-Type: application/octet-stream",
                "--data-binary",
                &format!("@{}", body.display()),
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                &format!("{location}{separator}digest={digest}"),
            ],
        );
        assert_eq!(String::from_utf8(put.stdout).unwrap(), "201");
        digest
    }

    fn get_blob(registry: &Registry, digest: &str) -> Vec<u8> {
        let out = curl(
            registry,
            true,
            &[
                "--fail",
                &url(registry, &format!("/v2/test/x/blobs/{digest}")),
            ],
        );
        assert!(
            out.status.success(),
            "GET blob: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    #[test]
    fn a_registry_serves_tls_with_its_own_ca_and_asks_for_credentials() {
        let scratch = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let mut registry = Registry::start(&scratch.path().join("registry")).unwrap();
        eprintln!("the registry started in {:?}", started.elapsed());
        assert_eq!(status(&registry, false, "/v2/"), "401");
        assert_eq!(status(&registry, true, "/v2/"), "200");

        let system_roots = Command::new("curl")
            .args([
                "-sS",
                "-m",
                "10",
                "-o",
                "/dev/null",
                &url(&registry, "/v2/"),
            ])
            .output()
            .unwrap();
        // 60: the peer's certificate failed verification.
        assert_eq!(
            system_roots.status.code(),
            Some(60),
            "curl with the system roots: {}",
            String::from_utf8_lossy(&system_roots.stderr)
        );

        let blob = b"edgegate registry blob \x00\xff\n".repeat(100);
        let digest = push_blob(&registry, &blob, scratch.path());
        assert_eq!(get_blob(&registry, &digest), blob);
        assert_eq!(fs::read(registry.blob_file(&digest)).unwrap(), blob);

        registry.stop().unwrap();
        let down = curl(
            &registry,
            true,
            &["-o", "/dev/null", &url(&registry, "/v2/")],
        );
        // 7: the connection was refused.
        assert_eq!(down.status.code(), Some(7));

        let restarted = Instant::now();
        registry.restart().unwrap();
        eprintln!("the registry restarted in {:?}", restarted.elapsed());
        assert_eq!(get_blob(&registry, &digest), blob);
    }
}
