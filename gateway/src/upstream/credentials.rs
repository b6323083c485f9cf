//! The gateway's own identity towards kube-apiserver, read from a kubeconfig: the CA to
//! trust, a client certificate or a token, and the server of the current context.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::HeaderValue;
use kube::client::ConfigExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use rustls::ClientConfig;
use thiserror::Error;

use super::cert_files::Stamp;
use super::cert_files::{CHECK_EVERY as CERT_CHECK_EVERY, CertFiles, CertFilesError};

/// Why the credentials could not be loaded.
#[derive(Debug, Error)]
pub enum CredentialsError {
    /// The kubeconfig could not be read or parsed.
    #[error("cannot load kubeconfig {path}")]
    Kubeconfig {
        /// The kubeconfig path.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The TLS settings in the kubeconfig are unusable.
    #[error("bad TLS settings in the kubeconfig")]
    Tls(#[source] kube::Error),
    /// The kubeconfig names an authentication method the gateway does not support.
    #[error(
        "the kubeconfig user authenticates with {0}, which edgegate does not support; use a client certificate or a token"
    )]
    Unsupported(&'static str),
    /// A token or basic-auth value cannot be sent in a header.
    #[error("the kubeconfig token or password is not a valid header value")]
    BadHeader,
    /// The client certificate files cannot be loaded.
    #[error("cannot load the kubeconfig's client certificate")]
    ClientCertificate(#[source] CertFilesError),
    /// The token file cannot be read.
    #[error("cannot read token file {path}")]
    TokenFile {
        /// The token file path.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
}

/// TLS settings and the `Authorization` value the gateway uses on its own behalf.
#[derive(Clone)]
pub struct Credentials {
    /// TLS carrying the gateway's client certificate, if the kubeconfig has one.
    pub(crate) own_tls: Arc<ClientConfig>,
    /// TLS without a client certificate, for requests that bring their own `Authorization`:
    /// kube-apiserver would authenticate a client certificate before the bearer token.
    pub(crate) bare_tls: Arc<ClientConfig>,
    /// The client certificate's files, when the kubeconfig names files (kubelet rotates
    /// `kubelet-client-current.pem`): `own_tls` presents them as they are at each handshake.
    pub(crate) cert_files: Option<Arc<CertFiles>>,
    /// The header the gateway adds to requests sent on its own identity.
    authorization: Option<Arc<Authorization>>,
    /// The server of the kubeconfig's current context.
    pub(crate) default_server: Option<http::Uri>,
    /// The kubeconfig's CA certificates (DER): the cluster's CA.
    pub(crate) cluster_ca: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("default_server", &self.default_server)
            .field("authorization", &self.authorization.is_some())
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Loads the credentials of the current context of a kubeconfig file.
    pub async fn from_kubeconfig(path: &Path) -> Result<Credentials, CredentialsError> {
        let kubeconfig_error = |source| CredentialsError::Kubeconfig {
            path: path.to_owned(),
            source,
        };
        let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?;
        Credentials::from_config(config)
    }

    /// Credentials that add nothing: the system trust store and no identity, for servers
    /// given without a kubeconfig.
    pub fn anonymous() -> Result<Credentials, CredentialsError> {
        let config = kube::Config::new(http::Uri::from_static("https://kubernetes.invalid"));
        let mut credentials = Credentials::from_config(config)?;
        credentials.default_server = None;
        Ok(credentials)
    }

    fn from_config(config: kube::Config) -> Result<Credentials, CredentialsError> {
        let auth = &config.auth_info;
        if auth.exec.is_some() {
            return Err(CredentialsError::Unsupported("an exec plugin"));
        }
        if auth.auth_provider.is_some() {
            return Err(CredentialsError::Unsupported("an auth provider"));
        }
        let authorization = Authorization::of(auth)?.map(Arc::new);
        let mut own_tls = config
            .rustls_client_config()
            .map_err(CredentialsError::Tls)?;
        let cert_files = match (
            &auth.client_certificate,
            &auth.client_key,
            &auth.client_certificate_data,
            &auth.client_key_data,
        ) {
            (Some(cert), Some(key), None, None) => {
                let provider = own_tls.crypto_provider().clone();
                let files = CertFiles::load(Path::new(cert), Path::new(key), provider)
                    .map_err(CredentialsError::ClientCertificate)?;
                let files = Arc::new(files);
                own_tls.client_auth_cert_resolver = files.clone();
                Some(files)
            }
            _ => None,
        };
        let mut bare = config.clone();
        bare.auth_info.client_certificate = None;
        bare.auth_info.client_certificate_data = None;
        bare.auth_info.client_key = None;
        bare.auth_info.client_key_data = None;
        let bare_tls = bare.rustls_client_config().map_err(CredentialsError::Tls)?;
        let cluster_ca = config
            .root_cert
            .iter()
            .flatten()
            .map(|der| rustls::pki_types::CertificateDer::from(der.clone()))
            .collect();
        Ok(Credentials {
            cluster_ca,
            own_tls: Arc::new(own_tls),
            bare_tls: Arc::new(bare_tls),
            cert_files,
            authorization,
            default_server: Some(config.cluster_url),
        })
    }

    /// The cluster's CA certificates (from the kubeconfig; none when it trusts the system's).
    pub fn cluster_ca(&self) -> &[rustls::pki_types::CertificateDer<'static>] {
        &self.cluster_ca
    }

    /// The `Authorization` value for a request sent on the gateway's identity, if any.
    pub(crate) fn authorization(&self) -> Option<HeaderValue> {
        self.authorization.as_ref().map(|a| a.value())
    }
}

/// The `Authorization` value of the kubeconfig user.
enum Authorization {
    /// A bearer token or basic credentials, fixed for the life of the process.
    Fixed(HeaderValue),
    /// A bearer token read from a file (projected service-account tokens rotate), looked at
    /// every [`CERT_CHECK_EVERY`] at most and read again when it changed.
    File {
        path: PathBuf,
        cached: Mutex<TokenFile>,
    },
}

/// A token file as last read.
struct TokenFile {
    checked: Instant,
    stamp: Stamp,
    value: HeaderValue,
}

impl Authorization {
    fn of(auth: &kube::config::AuthInfo) -> Result<Option<Authorization>, CredentialsError> {
        use secrecy::ExposeSecret;
        if let Some(token) = &auth.token {
            return bearer(token.expose_secret()).map(|v| Some(Authorization::Fixed(v)));
        }
        if let Some(file) = &auth.token_file {
            let path = PathBuf::from(file);
            let stamp = Stamp::of(&path);
            let value = read_token(&path)?;
            return Ok(Some(Authorization::File {
                path,
                cached: Mutex::new(TokenFile {
                    checked: Instant::now(),
                    stamp,
                    value,
                }),
            }));
        }
        if let (Some(user), Some(password)) = (&auth.username, &auth.password) {
            use base64::Engine;
            let pair = format!("{user}:{}", password.expose_secret());
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            let mut value = HeaderValue::from_str(&format!("Basic {encoded}"))
                .map_err(|_| CredentialsError::BadHeader)?;
            value.set_sensitive(true);
            return Ok(Some(Authorization::Fixed(value)));
        }
        Ok(None)
    }

    fn value(&self) -> HeaderValue {
        self.value_checked_every(CERT_CHECK_EVERY)
    }

    fn value_checked_every(&self, every: Duration) -> HeaderValue {
        match self {
            Authorization::Fixed(value) => value.clone(),
            Authorization::File { path, cached } => {
                let mut cached = cached.lock().unwrap_or_else(|p| p.into_inner());
                if cached.checked.elapsed() >= every {
                    cached.checked = Instant::now();
                    let stamp = Stamp::of(path);
                    if stamp != cached.stamp {
                        cached.stamp = stamp;
                        match read_token(path) {
                            Ok(value) => cached.value = value,
                            // Keep the last good token; the file may be mid-rotation.
                            Err(error) => tracing::warn!(%error, "keeping the previous token"),
                        }
                    }
                }
                cached.value.clone()
            }
        }
    }
}

fn read_token(path: &Path) -> Result<HeaderValue, CredentialsError> {
    let token_error = |source| CredentialsError::TokenFile {
        path: path.to_owned(),
        source,
    };
    let token = std::fs::read_to_string(path).map_err(token_error)?;
    if token.trim().is_empty() {
        // Being rewritten, most likely: an empty token is never right.
        let empty = std::io::Error::new(std::io::ErrorKind::InvalidData, "the file is empty");
        return Err(token_error(empty));
    }
    bearer(token.trim())
}

fn bearer(token: &str) -> Result<HeaderValue, CredentialsError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| CredentialsError::BadHeader)?;
    value.set_sensitive(true);
    Ok(value)
}
