//! The list options of a query, parsed once for everything that reads them: the request's
//! verb and name ([`super::RequestInfo`]), the cache's set, the local proxy's reads and
//! watches.

use std::time::Duration;

/// The list options of a request's query. A key given twice counts by its first value, as
/// kube-apiserver decodes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// `watch=` as kube-apiserver reads it.
    pub watch: bool,
    /// The name an exact `metadata.name` field selector pins.
    pub exact_name: Option<String>,
    /// `labelSelector`.
    pub labels: String,
    /// `fieldSelector`.
    pub fields: String,
    /// `continue`, if non-empty.
    pub continue_token: Option<String>,
    /// `resourceVersion`, if non-empty.
    pub resource_version: Option<String>,
    /// `timeoutSeconds`, if given and valid.
    pub timeout_seconds: Option<u64>,
    /// `allowWatchBookmarks=true`.
    pub allow_watch_bookmarks: bool,
    /// `resourceVersionMatch`, if non-empty.
    pub resource_version_match: Option<String>,
    /// `sendInitialEvents`, if given.
    pub send_initial_events: Option<String>,
    /// `limit`, if a positive number (kube-apiserver reads any other as no limit).
    pub limit: Option<u64>,
}

impl ListQuery {
    /// Reads the list options of a raw (still encoded) query string.
    pub fn parse(query: Option<&str>) -> ListQuery {
        let mut parsed = ListQuery::default();
        let Some(query) = query else { return parsed };
        let mut watch_value = None;
        // A key given twice counts once, by its first value, as kube-apiserver decodes it:
        // one bit per key read.
        let mut seen = 0u16;
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let bit = match key.as_ref() {
                "watch" => 1,
                "labelSelector" => 1 << 1,
                "fieldSelector" => 1 << 2,
                "continue" => 1 << 3,
                "resourceVersion" => 1 << 4,
                "timeoutSeconds" => 1 << 5,
                "allowWatchBookmarks" => 1 << 6,
                "resourceVersionMatch" => 1 << 7,
                "sendInitialEvents" => 1 << 8,
                "limit" => 1 << 9,
                _ => continue,
            };
            if seen & bit != 0 {
                continue;
            }
            seen |= bit;
            match key.as_ref() {
                "watch" => watch_value = Some(value.into_owned()),
                "labelSelector" => parsed.labels = value.into_owned(),
                "fieldSelector" => {
                    parsed.exact_name = exact_name(&value);
                    parsed.fields = value.into_owned();
                }
                "continue" if !value.is_empty() => parsed.continue_token = Some(value.into_owned()),
                "resourceVersion" if !value.is_empty() => {
                    parsed.resource_version = Some(value.into_owned());
                }
                "timeoutSeconds" => parsed.timeout_seconds = value.parse().ok(),
                "allowWatchBookmarks" => parsed.allow_watch_bookmarks = value == "true",
                "resourceVersionMatch" if !value.is_empty() => {
                    parsed.resource_version_match = Some(value.into_owned());
                }
                "sendInitialEvents" => parsed.send_initial_events = Some(value.into_owned()),
                "limit" => {
                    parsed.limit = value
                        .parse::<i64>()
                        .ok()
                        .and_then(|l| u64::try_from(l).ok())
                        .filter(|&l| l > 0)
                }
                _ => {}
            }
        }
        parsed.watch = watch_value.is_some_and(|v| watch_flag(&v));
        parsed
    }
}

impl ListQuery {
    /// How long a watch served by the gateway lasts: the client's `timeoutSeconds`, else,
    /// as YurtHub's (and kube-apiserver's), `min` × (1 + `spread`) for a random `spread` in
    /// [0, 1), so that the watches of a node do not all end, and re-list, at once.
    pub fn watch_lasts(&self, min: Duration, spread: f64) -> Duration {
        match self.timeout_seconds {
            Some(seconds) if seconds > 0 => Duration::from_secs(seconds),
            _ => min.mul_f64(1.0 + spread.clamp(0.0, 1.0)),
        }
    }
}

/// Reads `watch=` as Go's `strconv.ParseBool`; a value it cannot parse counts as true unless
/// it reads `false` or `0`, which is what kube-apiserver falls back to.
fn watch_flag(value: &str) -> bool {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
        "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
        other => !matches!(other.to_ascii_lowercase().as_str(), "false" | "0"),
    }
}

/// The name a field selector pins with `metadata.name=x` or `metadata.name==x`, if it is a
/// valid path segment.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (field, value) = term.split_once("==").or_else(|| {
            // `!=` is an inequality; only a lone `=` is an exact match.
            term.split_once('=')
                .filter(|(field, _)| !field.ends_with('!'))
        })?;
        if field.trim() != "metadata.name" {
            return None;
        }
        let value = value.trim();
        let valid =
            !value.is_empty() && value != "." && value != ".." && !value.contains(['/', '%']);
        valid.then(|| value.to_owned())
    })
}

/// `query` with its `resourceVersion` set to `version`, the rest as it was.
pub fn with_resource_version(query: &str, version: u64) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key == "resourceVersion" {
            out.append_pair(&key, &version.to_string());
        } else {
            out.append_pair(&key, &value);
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_options_the_cache_and_the_local_proxy_use() {
        let query = ListQuery::parse(Some(
            "labelSelector=app%3Dx&fieldSelector=spec.nodeName%3Dn&continue=c&resourceVersion=5&timeoutSeconds=30&allowWatchBookmarks=true",
        ));
        assert_eq!(query.labels, "app=x");
        assert_eq!(query.fields, "spec.nodeName=n");
        assert_eq!(query.continue_token.as_deref(), Some("c"));
        assert_eq!(query.resource_version.as_deref(), Some("5"));
        assert_eq!(query.timeout_seconds, Some(30));
        assert!(query.allow_watch_bookmarks);
        assert!(!ListQuery::parse(Some("allowWatchBookmarks=false")).allow_watch_bookmarks);
        assert!(!ListQuery::parse(None).allow_watch_bookmarks);
    }

    #[test]
    fn a_limit_counts_when_it_is_a_positive_number() {
        let limit = |query: &str| ListQuery::parse(Some(query)).limit;
        assert_eq!(limit("limit=500"), Some(500));
        for none in ["limit=0", "limit=-1", "limit=x", "limit=", ""] {
            assert_eq!(limit(none), None, "{none}");
        }
    }

    #[test]
    fn a_watch_without_timeout_lasts_once_to_twice_min_request_timeout() {
        let min = Duration::from_secs(100);
        let lasts = |query: &str, spread| ListQuery::parse(Some(query)).watch_lasts(min, spread);
        assert_eq!(lasts("", 0.0), min);
        assert_eq!(lasts("", 0.5), Duration::from_secs(150));
        assert_eq!(
            lasts("timeoutSeconds=0", 0.999),
            Duration::from_secs_f64(199.9)
        );
        assert_eq!(lasts("timeoutSeconds=7", 0.5), Duration::from_secs(7));
    }

    #[test]
    fn a_key_given_twice_counts_by_its_first_value() {
        let query = ListQuery::parse(Some(
            "watch=1&watch=false&fieldSelector=metadata.name%3Da&fieldSelector=metadata.name%3Db&labelSelector=x&labelSelector=y",
        ));
        assert!(query.watch);
        assert_eq!(query.exact_name.as_deref(), Some("a"));
        assert_eq!(
            (query.fields.as_str(), query.labels.as_str()),
            ("metadata.name=a", "x")
        );
    }

    #[test]
    fn only_the_resource_version_of_a_query_is_replaced() {
        let query = "fieldSelector=spec.nodeName%3Dedge-1&resourceVersion=11&limit=500";
        assert_eq!(
            with_resource_version(query, 10),
            "fieldSelector=spec.nodeName%3Dedge-1&resourceVersion=10&limit=500"
        );
    }
}
