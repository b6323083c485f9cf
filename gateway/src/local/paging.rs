//! How an offline list is read, from its `limit`, `continue`, `resourceVersion` and
//! `resourceVersionMatch`, with kube-apiserver's validation and semantics:
//!
//! | options | offline answer |
//! |---|---|
//! | no `resourceVersion` | the cached set as it is, paged by `limit` |
//! | `resourceVersion=0` | the whole cached set (the watch cache ignores `limit` there) |
//! | `resourceVersion=N`, `NotOlderThan` (or unset, no `limit`) | the set if the cache holds `N`, else `504` "Too large resource version" |
//! | `resourceVersion=N`, `Exact` (or unset, with `limit`) | the set at `N` if the cache proves it unchanged since, else `410` |
//! | `continue` | the next page at the token's version, from the apiserver's token or the gateway's; `410` with a token at the newest when the page changed since |

use super::continue_token::ContinueToken;
use super::error::LocalError;
use crate::request::ListQuery;

/// What an offline list reads.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ListRead {
    /// The first key of the page (a continue token's); `None` from the first member.
    pub from: Option<String>,
    /// At most this many items; `None` for all.
    pub limit: Option<u64>,
    /// The version the answer must be exact at.
    pub exact_at: Option<u64>,
    /// The version the cache must hold at least.
    pub not_older_than: Option<u64>,
    /// The continue token the list goes on from: a page it cannot give at its version is
    /// refused with one that goes on at the newest.
    pub continued: Option<ContinueToken>,
}

impl ListRead {
    /// What `query` asks to read, or kube-apiserver's refusal of it.
    pub fn of(query: &ListQuery) -> Result<ListRead, LocalError> {
        validate(query)?;
        let limit = query.limit;
        let version = query.resource_version.as_deref();
        if let Some(token) = &query.continue_token {
            let token = ContinueToken::decode(token).map_err(|why| {
                LocalError::BadListOptions(format!("invalid continue token: {why}"))
            })?;
            if version.is_some_and(|v| v != "0") {
                return Err(LocalError::BadListOptions(
                    "specifying resource version is not allowed when using continue".to_owned(),
                ));
            }
            return Ok(ListRead {
                from: Some(token.start.clone()),
                limit,
                exact_at: u64::try_from(token.resource_version)
                    .ok()
                    .filter(|v| *v > 0),
                not_older_than: None,
                continued: Some(token),
            });
        }
        let mut read = ListRead {
            from: None,
            limit,
            exact_at: None,
            not_older_than: None,
            continued: None,
        };
        let Some(version) = version else {
            return Ok(read);
        };
        // A version the cache cannot compare is read as no version, as before paging.
        let Ok(number) = version.parse::<u64>() else {
            return Ok(read);
        };
        match query.resource_version_match.as_deref() {
            _ if number == 0 => read.limit = None,
            Some("Exact") => read.exact_at = Some(number),
            None if limit.is_some() => read.exact_at = Some(number),
            _ => read.not_older_than = Some(number),
        }
        Ok(read)
    }
}

/// kube-apiserver's validation of a list's options, in its words.
fn validate(query: &ListQuery) -> Result<(), LocalError> {
    let mut errors = Vec::new();
    if let Some(matching) = query.resource_version_match.as_deref() {
        let forbidden = |why: &str| format!("resourceVersionMatch: Forbidden: {why}");
        if query.resource_version.is_none() {
            errors.push(forbidden(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if query.continue_token.is_some() {
            errors.push(forbidden(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        match matching {
            "Exact" if query.resource_version.as_deref() == Some("0") => errors.push(forbidden(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            )),
            "Exact" | "NotOlderThan" => {}
            other => errors.push(format!(
                "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
            )),
        }
    }
    if query.send_initial_events.is_some() {
        errors.push(
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list".to_owned(),
        );
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(LocalError::InvalidListOptions(errors.remove(0))),
        _ => Err(LocalError::InvalidListOptions(format!(
            "[{}]",
            errors.join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(query: &str) -> Result<ListRead, LocalError> {
        ListRead::of(&ListQuery::parse(Some(query)))
    }

    #[test]
    fn versions_read_as_the_apiserver_reads_them() {
        let whole = read("limit=5&resourceVersion=0").unwrap();
        assert_eq!((whole.limit, whole.exact_at), (None, None));
        let newest = read("limit=5").unwrap();
        assert_eq!(
            (newest.limit, newest.exact_at, newest.not_older_than),
            (Some(5), None, None)
        );
        let legacy = read("limit=5&resourceVersion=7").unwrap();
        assert_eq!(legacy.exact_at, Some(7), "a paged read at N is exact");
        let exact = read("resourceVersion=7&resourceVersionMatch=Exact").unwrap();
        assert_eq!(exact.exact_at, Some(7));
        let not_older = read("limit=5&resourceVersion=7&resourceVersionMatch=NotOlderThan");
        assert_eq!(not_older.unwrap().not_older_than, Some(7));
        assert_eq!(read("resourceVersion=7").unwrap().not_older_than, Some(7));
    }

    #[test]
    fn a_continue_token_sets_the_start_and_version() {
        let token = ContinueToken::after("default/a", 42).encode();
        let page = read(&format!("limit=2&continue={token}")).unwrap();
        assert_eq!(page.from.as_deref(), Some("default/a\0"));
        assert_eq!(page.exact_at, Some(42));
        let newest = ContinueToken::after("a", 42).at_newest().encode();
        assert_eq!(read(&format!("continue={newest}")).unwrap().exact_at, None);
        let with_version = read(&format!("continue={token}&resourceVersion=3"));
        assert!(matches!(with_version, Err(LocalError::BadListOptions(_))));
        assert!(read(&format!("continue={token}&resourceVersion=0")).is_ok());
        let junk = read("continue=junk").unwrap_err().to_string();
        assert!(
            junk.starts_with("invalid continue token: continue key is not valid"),
            "{junk}"
        );
    }

    #[test]
    fn contradicting_options_are_refused_as_the_apiserver_validates_them() {
        let refused = |query: &str| read(query).unwrap_err().to_string();
        assert_eq!(
            refused("resourceVersionMatch=Exact"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert!(
            refused("resourceVersion=0&resourceVersionMatch=Exact")
                .contains("\"exact\" is forbidden")
        );
        assert!(
            refused("resourceVersion=1&resourceVersionMatch=Newest")
                .contains("Unsupported value: \"Newest\"")
        );
        let two = refused("resourceVersionMatch=Exact&continue=x");
        assert!(two.contains("is invalid: [resourceVersionMatch"), "{two}");
        assert!(refused("sendInitialEvents=true").contains("forbidden for list"));
    }
}
