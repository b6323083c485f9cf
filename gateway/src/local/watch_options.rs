//! An offline watch's options, validated as kube-apiserver validates them (with its
//! WatchList feature on), and what they ask of the backlog: `sendInitialEvents=true` is
//! answered with every member as ADDED and the bookmark that ends the initial events.

use super::error::LocalError;
use crate::request::ListQuery;

/// Where an offline watch's backlog starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Since {
    /// The set's changes after this version (every member as ADDED for none, or `0`).
    Version(String),
    /// Nothing before the watch: `sendInitialEvents=false` from no version.
    Now,
}

/// What an offline watch sends first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct WatchRead {
    /// Where its backlog starts.
    pub since: Since,
    /// A BOOKMARK after the backlog (`allowWatchBookmarks`).
    pub bookmark: bool,
    /// That bookmark ends the initial events (`sendInitialEvents=true`): it is always sent,
    /// annotated `k8s.io/initial-events-end`.
    pub initial_events_end: bool,
}

impl WatchRead {
    /// What `query` asks an offline watch for, or kube-apiserver's refusal of it.
    pub fn of(query: &ListQuery) -> Result<WatchRead, LocalError> {
        let initial = match query.send_initial_events.as_deref() {
            None => None,
            Some(value) => Some(parse_bool(value).ok_or_else(|| {
                LocalError::BadListOptions(format!(
                    "sendInitialEvents: invalid value {value:?}: not a boolean"
                ))
            })?),
        };
        validate(query, initial)?;
        let version = query.resource_version.clone().unwrap_or_default();
        let since = match initial {
            Some(true) => Since::Version(String::new()),
            Some(false) if version.is_empty() || version == "0" => Since::Now,
            _ => Since::Version(version),
        };
        Ok(WatchRead {
            since,
            bookmark: query.allow_watch_bookmarks,
            initial_events_end: initial == Some(true),
        })
    }
}

/// kube-apiserver's validation of a watch's options, in its words.
fn validate(query: &ListQuery, initial: Option<bool>) -> Result<(), LocalError> {
    let matching = query.resource_version_match.as_deref();
    let mut errors = Vec::new();
    if initial.is_some() {
        if matching != Some("NotOlderThan") {
            errors.push(
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            );
        }
        if !query.allow_watch_bookmarks {
            errors.push(
                "allowWatchBookmarks: Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true",
            );
        }
    }
    if let Some(matching) = matching {
        if initial.is_none() {
            errors.push(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            );
        }
        if matching != "NotOlderThan" {
            errors.push(
                "resourceVersionMatch: Unsupported value: supported values: \"NotOlderThan\"",
            );
        }
        if query.continue_token.is_some() {
            errors.push(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
            );
        }
    }
    match errors.as_slice() {
        [] => Ok(()),
        [one] => Err(LocalError::InvalidListOptions((*one).to_owned())),
        many => Err(LocalError::InvalidListOptions(format!(
            "[{}]",
            many.join(", ")
        ))),
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(query: &str) -> Result<WatchRead, LocalError> {
        WatchRead::of(&ListQuery::parse(Some(query)))
    }

    #[test]
    fn initial_events_are_every_member_then_the_end_bookmark() {
        let asked = read(
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=12",
        )
        .unwrap();
        assert_eq!(asked.since, Since::Version(String::new()));
        assert!(asked.initial_events_end && asked.bookmark);
        let none = read(
            "watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        )
        .unwrap();
        assert_eq!(none.since, Since::Now);
        let plain = read("watch=1&resourceVersion=12").unwrap();
        assert_eq!(plain.since, Since::Version("12".into()));
        assert!(!plain.initial_events_end);
    }

    #[test]
    fn a_watch_list_without_its_companions_is_refused_as_the_apiserver_refuses_it() {
        let refused = |query: &str| read(query).unwrap_err().to_string();
        assert!(
            refused("watch=1&sendInitialEvents=true&allowWatchBookmarks=true")
                .contains("requires setting resourceVersionMatch to NotOlderThan")
        );
        assert!(
            refused("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
                .contains("requires setting allowWatchBookmarks to true")
        );
        assert!(
            refused("watch=1&resourceVersionMatch=NotOlderThan")
                .contains("forbidden for watch unless sendInitialEvents is provided")
        );
        assert!(matches!(
            read("watch=1&sendInitialEvents=maybe"),
            Err(LocalError::BadListOptions(_))
        ));
    }
}
