//! Registry credentials: a Docker `config.json` (what a `kubernetes.io/dockerconfigjson`
//! pull secret holds), and the registry's `WWW-Authenticate` challenges (Basic, or Bearer
//! with a token service) answered with them.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::error::RegistryError;

/// Largest credentials file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// One registry's user and password.
#[derive(Clone)]
pub struct Login {
    /// The user.
    pub username: String,
    /// The password or token.
    pub password: SecretString,
}

impl Login {
    /// The `Authorization: Basic` value.
    pub(super) fn basic(&self) -> String {
        let pair = format!("{}:{}", self.username, self.password.expose_secret());
        format!("Basic {}", STANDARD.encode(pair))
    }
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Login({}, ***)", self.username)
    }
}

/// Logins by registry host, read from a Docker `config.json`.
#[derive(Clone, Debug, Default)]
pub struct Logins(BTreeMap<String, Login>);

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl Logins {
    /// Reads a Docker `config.json` (`{"auths": {"HOST": {"auth": base64(user:pass)}}}`, or
    /// `username` and `password`); keys may be written as URLs.
    pub fn read(path: &Path) -> Result<Logins, RegistryError> {
        use std::io::Read as _;
        let bad = |message: String| RegistryError::Credentials {
            path: path.to_owned(),
            message,
        };
        let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
        let mut text = String::new();
        file.take(MAX_FILE_BYTES)
            .read_to_string(&mut text)
            .map_err(|e| bad(e.to_string()))?;
        Logins::parse(&text).map_err(bad)
    }

    /// Parses the text of a Docker `config.json`.
    pub fn parse(text: &str) -> Result<Logins, String> {
        let file: ConfigFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut logins = BTreeMap::new();
        for (key, entry) in file.auths {
            let host = key
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            let (username, password) = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) => {
                    let pair = STANDARD
                        .decode(auth.trim())
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok())
                        .ok_or_else(|| format!("{key}: auth is not base64 of user:password"))?;
                    let (user, pass) = pair
                        .split_once(':')
                        .ok_or_else(|| format!("{key}: auth is not base64 of user:password"))?;
                    (user.to_owned(), pass.to_owned())
                }
                (None, Some(user), Some(pass)) => (user, pass),
                _ => return Err(format!("{key}: neither auth nor username and password")),
            };
            logins.insert(
                host,
                Login {
                    username,
                    password: SecretString::from(password),
                },
            );
        }
        Ok(Logins(logins))
    }

    /// The login for registry `host`, if any.
    pub fn for_host(&self, host: &str) -> Option<&Login> {
        self.0.get(host)
    }
}

/// What a registry's `401` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Challenge {
    /// The login, as Basic.
    Basic,
    /// A token from `realm`, for `service` and `scope`.
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

impl Challenge {
    /// Parses a `WWW-Authenticate` value (`Basic realm="…"`, `Bearer realm="…",service="…"`).
    pub(super) fn parse(value: &str) -> Option<Challenge> {
        let (scheme, params) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
        let params = parameters(params);
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => Some(Challenge::Basic),
            "bearer" => Some(Challenge::Bearer {
                realm: params.get("realm")?.clone(),
                service: params.get("service").cloned(),
                scope: params.get("scope").cloned(),
            }),
            _ => None,
        }
    }
}

/// `key="value",key=value` pairs; commas inside quotes are kept (scopes hold them).
fn parameters(text: &str) -> BTreeMap<String, String> {
    let mut pairs = BTreeMap::new();
    let mut rest = text.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            },
            None => match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            },
        };
        pairs.insert(key, value.to_owned());
        rest = next.trim_start().trim_start_matches(',');
    }
    pairs
}

/// A token service's answer.
#[derive(Deserialize)]
pub(super) struct TokenAnswer {
    token: Option<String>,
    access_token: Option<String>,
}

impl TokenAnswer {
    /// The token, as either field names it.
    pub(super) fn into_token(self) -> Option<String> {
        self.token.or(self.access_token).filter(|t| !t.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_docker_config_gives_a_login_per_host() {
        let auth = STANDARD.encode("filters:s3cret");
        let text = format!(
            r#"{{"auths": {{"127.0.0.1:5000": {{"auth": "{auth}"}},
                 "https://registry.example/v1/": {{"username": "u", "password": "p"}}}}}}"#
        );
        let logins = Logins::parse(&text).unwrap();
        let login = logins.for_host("127.0.0.1:5000").unwrap();
        assert_eq!(login.username, "filters");
        assert_eq!(login.basic(), format!("Basic {auth}"));
        assert_eq!(logins.for_host("registry.example").unwrap().username, "u");
        assert!(!format!("{login:?}").contains("s3cret"));
        assert!(Logins::parse(r#"{"auths": {"h": {"auth": "!!"}}}"#).is_err());
        assert!(Logins::parse(r#"{"auths": {"h": {}}}"#).is_err());
    }

    #[test]
    fn challenges_are_read_as_registries_write_them() {
        assert_eq!(
            Challenge::parse(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull,push".into()),
            })
        );
        assert_eq!(Challenge::parse("Bearer service=x"), None);
        assert_eq!(Challenge::parse("Negotiate"), None);
    }
}
