//! HTTPS to registries: the system's roots and the operator's registry CA, the logins of a
//! Docker `config.json`, challenges answered (Basic, or a Bearer token fetched once per
//! repository), redirects to blob storage followed, and every body read capped and timed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::auth::{Challenge, Logins, TokenAnswer};
use super::error::RegistryError;
use super::reference::Reference;

/// How long a registry has to answer a request's headers.
const HEADERS_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a body may take in all (a 20 MB component over a thin link).
const BODY_TIMEOUT: Duration = Duration::from_secs(600);
/// Redirects followed at most (blob storage behind a registry).
const MAX_REDIRECTS: usize = 5;
/// Largest error or token body read.
const SMALL_BODY: usize = 64 << 10;

/// Where the registry client's trust and logins come from.
#[derive(Clone, Debug, Default)]
pub struct RegistrySettings {
    /// A PEM file of CAs trusted besides the system's (`--filter-registry-ca`).
    pub ca_file: Option<PathBuf>,
    /// A Docker `config.json` of logins (`--filter-registry-config`).
    pub logins_file: Option<PathBuf>,
}

/// A client of any registry, with the node's trust and logins.
#[derive(Clone)]
pub struct Registries {
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    logins: Arc<Logins>,
    /// `Authorization` values that worked, by registry and repository.
    granted: Arc<Mutex<HashMap<String, HeaderValue>>>,
}

impl Registries {
    /// A client trusting the system's roots and the settings' CA, with their logins. The
    /// files are read now: a change needs a restart, as kubelet's do.
    pub fn new(settings: &RegistrySettings) -> Result<Registries, RegistryError> {
        let mut roots = rustls::RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if let Some(path) = &settings.ca_file {
            add_ca(&mut roots, path)?;
        }
        let tls = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .build();
        let logins = match &settings.logins_file {
            Some(path) => Logins::read(path)?,
            None => Logins::default(),
        };
        Ok(Registries {
            http: Client::builder(TokioExecutor::new()).build(https),
            logins: Arc::new(logins),
            granted: Arc::default(),
        })
    }

    /// Sends a request about `image`'s repository (`scope`: `pull` or `pull,push`), answering
    /// one challenge, following redirects on a GET; an error status is an error.
    pub(super) async fn send(
        &self,
        image: &Reference,
        scope: &str,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response<Incoming>, RegistryError> {
        let key = format!("{}/{}", image.api_host(), image.repository);
        let granted = self.granted(&key);
        let response = self
            .once(method.clone(), url, &headers, body.clone(), granted)
            .await?;
        let response = if response.status() == StatusCode::UNAUTHORIZED {
            let authorization = self.answer(image, scope, url, &response).await?;
            let retried = self
                .once(
                    method.clone(),
                    url,
                    &headers,
                    body,
                    Some(authorization.clone()),
                )
                .await?;
            if retried.status() != StatusCode::UNAUTHORIZED {
                self.grant(key, authorization);
            }
            retried
        } else {
            response
        };
        let response = self.follow(method, url, response).await?;
        check_status(url, response).await
    }

    /// Follows a GET's redirects (to another host, without credentials).
    async fn follow(
        &self,
        method: Method,
        url: &str,
        mut response: Response<Incoming>,
    ) -> Result<Response<Incoming>, RegistryError> {
        let mut at = url.to_owned();
        for _ in 0..MAX_REDIRECTS {
            if method != Method::GET || !response.status().is_redirection() {
                return Ok(response);
            }
            let Some(location) = response
                .headers()
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
            else {
                return Ok(response);
            };
            at = join(&at, location);
            response = self
                .once(Method::GET, &at, &HeaderMap::new(), Bytes::new(), None)
                .await?;
        }
        Ok(response)
    }

    /// One exchange, its headers within [`HEADERS_TIMEOUT`].
    async fn once(
        &self,
        method: Method,
        url: &str,
        headers: &HeaderMap,
        body: Bytes,
        authorization: Option<HeaderValue>,
    ) -> Result<Response<Incoming>, RegistryError> {
        let unreachable = |message: String| RegistryError::Unreachable {
            url: url.to_owned(),
            message,
        };
        let mut request = Request::builder().method(method).uri(url);
        if let Some(h) = request.headers_mut() {
            h.extend(headers.clone());
            h.insert(
                header::USER_AGENT,
                HeaderValue::from_static(concat!("edgegate/", env!("CARGO_PKG_VERSION"))),
            );
            if let Some(value) = authorization {
                h.insert(header::AUTHORIZATION, value);
            }
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| unreachable(e.to_string()))?;
        match tokio::time::timeout(HEADERS_TIMEOUT, self.http.request(request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(error)) => Err(unreachable(crate::error::error_chain(&error))),
            Err(_) => Err(unreachable(format!(
                "no answer within {}s",
                HEADERS_TIMEOUT.as_secs()
            ))),
        }
    }

    /// The `Authorization` a 401 asks for: Basic with the host's login, or a Bearer token
    /// fetched from the challenge's realm (with the login, if any).
    async fn answer(
        &self,
        image: &Reference,
        scope: &str,
        url: &str,
        response: &Response<Incoming>,
    ) -> Result<HeaderValue, RegistryError> {
        let unauthorized = |message: &str| RegistryError::Unauthorized {
            url: url.to_owned(),
            message: message.to_owned(),
        };
        let challenge = response
            .headers()
            .get_all(header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(Challenge::parse)
            .ok_or_else(|| unauthorized("no challenge this client answers"))?;
        let login = self.logins.for_host(&image.registry);
        let value = match challenge {
            Challenge::Basic => login
                .ok_or_else(|| unauthorized(&format!("no login for {}", image.registry)))?
                .basic(),
            Challenge::Bearer {
                realm,
                service,
                scope: _,
            } => {
                let query = {
                    let mut query = form_urlencoded::Serializer::new(String::new());
                    if let Some(service) = &service {
                        query.append_pair("service", service);
                    }
                    query.append_pair("scope", &format!("repository:{}:{scope}", image.repository));
                    query.finish()
                };
                let sep = if realm.contains('?') { '&' } else { '?' };
                let token_url = format!("{realm}{sep}{query}");
                let authorization = login.map(|l| l.basic()).and_then(|b| b.parse().ok());
                let answer = self
                    .once(
                        Method::GET,
                        &token_url,
                        &HeaderMap::new(),
                        Bytes::new(),
                        authorization,
                    )
                    .await?;
                let answer = check_status(&token_url, answer).await?;
                let body = read_capped(&token_url, answer, SMALL_BODY).await?;
                let token = serde_json::from_slice::<TokenAnswer>(&body)
                    .ok()
                    .and_then(TokenAnswer::into_token)
                    .ok_or_else(|| unauthorized("the token service gave no token"))?;
                format!("Bearer {token}")
            }
        };
        value
            .parse()
            .map_err(|_| unauthorized("the credentials are not a header value"))
    }

    fn granted(&self, key: &str) -> Option<HeaderValue> {
        let granted = self.granted.lock().unwrap_or_else(|p| p.into_inner());
        granted.get(key).cloned()
    }

    fn grant(&self, key: String, value: HeaderValue) {
        let mut granted = self.granted.lock().unwrap_or_else(|p| p.into_inner());
        granted.insert(key, value);
    }
}

/// Adds the CAs of PEM file `path` to `roots`.
fn add_ca(roots: &mut rustls::RootCertStore, path: &std::path::Path) -> Result<(), RegistryError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let bad = |message: String| RegistryError::Ca {
        path: path.to_owned(),
        message,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no certificate in the file".into()));
    }
    for cert in certs {
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    Ok(())
}

/// `location` resolved against `base` (absolute, or a path on the same host).
fn join(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_owned();
    }
    let origin_end = base
        .find("://")
        .and_then(|scheme| base[scheme + 3..].find('/').map(|p| p + scheme + 3))
        .unwrap_or(base.len());
    format!("{}{location}", &base[..origin_end])
}

/// The response, or an error naming the status and the registry's message.
async fn check_status(
    url: &str,
    response: Response<Incoming>,
) -> Result<Response<Incoming>, RegistryError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = read_capped(url, response, SMALL_BODY)
        .await
        .unwrap_or_default();
    let message = String::from_utf8_lossy(&body)
        .trim()
        .chars()
        .take(300)
        .collect();
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        return Err(RegistryError::Unauthorized {
            url: url.to_owned(),
            message,
        });
    }
    Err(RegistryError::Status {
        url: url.to_owned(),
        status: status.as_u16(),
        message,
    })
}

/// A body read whole, refused past `cap` bytes or after [`BODY_TIMEOUT`].
pub(super) async fn read_capped(
    url: &str,
    response: Response<Incoming>,
    cap: usize,
) -> Result<Bytes, RegistryError> {
    let limited = Limited::new(response.into_body(), cap);
    match tokio::time::timeout(BODY_TIMEOUT, limited.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) => Err(RegistryError::Content {
            what: url.to_owned(),
            message: if error.is::<http_body_util::LengthLimitError>() {
                format!("larger than {cap} bytes")
            } else {
                crate::error::error_chain(&*error)
            },
        }),
        Err(_) => Err(RegistryError::Unreachable {
            url: url.to_owned(),
            message: format!("the body took over {}s", BODY_TIMEOUT.as_secs()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_resolve_against_the_registry() {
        assert_eq!(
            join(
                "https://r.example:5000/v2/a/blobs/sha256:x",
                "/store/x?sig=1"
            ),
            "https://r.example:5000/store/x?sig=1"
        );
        assert_eq!(
            join("https://r.example/v2/a", "https://cdn.example/x"),
            "https://cdn.example/x"
        );
    }
}
