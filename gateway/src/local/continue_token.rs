//! kube-apiserver's continue tokens, read and written as it does: base64url (no padding) of
//! `{"v":"meta.k8s.io/v1","rv":<version>,"start":"<key>\u0000"}`, the key relative to the
//! list's prefix. A token the apiserver gave before the link dropped goes on offline, and one
//! the gateway gives goes on online.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// The only encoding version kube-apiserver writes.
const VERSION: &str = "meta.k8s.io/v1";

/// A continue token's contents.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct ContinueToken {
    /// The encoding version.
    #[serde(rename = "v")]
    api_version: String,
    /// The version the list is read at; negative for the newest (a token given with an
    /// inconsistent-continue `410`).
    #[serde(rename = "rv")]
    pub resource_version: i64,
    /// The first key of the next page, relative to the list's prefix.
    #[serde(rename = "start")]
    pub start: String,
}

impl ContinueToken {
    /// The token for the page after the one that ended with `last` (a relative key), read
    /// at `resource_version`.
    pub fn after(last: &str, resource_version: i64) -> ContinueToken {
        ContinueToken {
            api_version: VERSION.to_owned(),
            resource_version,
            start: format!("{last}\0"),
        }
    }

    /// The same start, at the newest version: what an inconsistent continue goes on with.
    pub fn at_newest(&self) -> ContinueToken {
        ContinueToken {
            api_version: VERSION.to_owned(),
            resource_version: -1,
            start: self.start.clone(),
        }
    }

    /// The token as a client sends it back.
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        URL_SAFE_NO_PAD.encode(json)
    }

    /// Reads `token` as kube-apiserver does; the error says why, in its words.
    pub fn decode(token: &str) -> Result<ContinueToken, String> {
        let invalid = |why: &dyn std::fmt::Display| format!("continue key is not valid: {why}");
        let json = URL_SAFE_NO_PAD.decode(token).map_err(|e| invalid(&e))?;
        let token: ContinueToken = serde_json::from_slice(&json).map_err(|e| invalid(&e))?;
        if token.api_version != VERSION {
            return Err(format!(
                "continue key is not valid: server does not recognize this encoded version {:?}",
                token.api_version
            ));
        }
        if token.start.is_empty() {
            return Err(invalid(&"encoded start key empty"));
        }
        if !is_clean(&token.start) {
            return Err(invalid(&token.start));
        }
        Ok(token)
    }
}

/// Whether `/`+`start` is what Go's `path.Clean` leaves unchanged: no empty, `.` or `..`
/// segment, so a token cannot reach outside its list.
fn is_clean(start: &str) -> bool {
    let start = start.strip_prefix('/').unwrap_or(start);
    start
        .split('/')
        .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_reads_as_kube_apiserver_writes_it() {
        // Given by kube-apiserver 1.20 for `limit=1` over the ConfigMaps of all namespaces.
        let given =
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NTQzMiwic3RhcnQiOiJkZWZhdWx0L2FcdTAwMDAifQ";
        let token = ContinueToken::decode(given).unwrap();
        assert_eq!(token.resource_version, 5432);
        assert_eq!(token.start, "default/a\0");
        assert_eq!(ContinueToken::after("default/a", 5432).encode(), given);
    }

    #[test]
    fn a_token_that_reaches_outside_its_list_is_refused() {
        for start in ["../secrets/a\0", "a//b", "a/./b", "a/", "."] {
            let token = ContinueToken {
                api_version: VERSION.to_owned(),
                resource_version: 1,
                start: start.to_owned(),
            };
            let error = ContinueToken::decode(&token.encode()).unwrap_err();
            assert!(error.starts_with("continue key is not valid"), "{start:?}");
        }
    }

    #[test]
    fn junk_and_other_versions_are_refused_in_the_apiservers_words() {
        assert!(ContinueToken::decode("!!").is_err());
        assert!(ContinueToken::decode(&URL_SAFE_NO_PAD.encode("{}")).is_err());
        let other = URL_SAFE_NO_PAD.encode(r#"{"v":"x/v2","rv":1,"start":"a"}"#);
        let error = ContinueToken::decode(&other).unwrap_err();
        assert!(
            error.contains("does not recognize this encoded version"),
            "{error}"
        );
        let empty = URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":1,"start":""}"#);
        assert!(
            ContinueToken::decode(&empty)
                .unwrap_err()
                .contains("start key empty")
        );
    }
}
