//! A pool-scope resource as `--pool-scope-resources` names it.

use std::fmt;

/// YurtHub's default `--pool-scope-resources`.
pub const YURTHUB_POOL_SCOPE_RESOURCES: &[&str] =
    &["/v1/services", "discovery.k8s.io/v1/endpointslices"];

/// One pool-scope resource: `group/version/resource` (`version/resource` for the core group).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Resource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource, plural and lowercase.
    pub plural: String,
}

/// A `--pool-scope-resources` entry that is not `[group/]version/resource`.
#[derive(Debug, thiserror::Error)]
#[error("pool-scope resource {0:?} is not [group/]version/resource")]
pub struct ResourceError(String);

impl Resource {
    /// Reads `group/version/resource`, `version/resource` or `/version/resource` (core).
    pub fn parse(text: &str) -> Result<Resource, ResourceError> {
        let parts: Vec<&str> = text.trim().split('/').collect();
        let (group, version, plural) = match parts[..] {
            [version, plural] => ("", version, plural),
            [group, version, plural] => (group, version, plural),
            _ => return Err(ResourceError(text.to_owned())),
        };
        let valid = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        };
        if !(valid(version) && valid(plural) && (group.is_empty() || valid(group))) {
            return Err(ResourceError(text.to_owned()));
        }
        Ok(Resource {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
        })
    }

    /// The resources `--pool-scope-resources` gives, YurtHub's when not given; empty
    /// entries are none (`--pool-scope-resources=` turns the multiplexer off).
    pub fn parse_all(given: Option<&[String]>) -> Result<Vec<Resource>, ResourceError> {
        let yurthubs: Vec<String> = YURTHUB_POOL_SCOPE_RESOURCES
            .iter()
            .map(|r| (*r).to_owned())
            .collect();
        given
            .unwrap_or(&yurthubs)
            .iter()
            .filter(|entry| !entry.trim().is_empty())
            .map(|entry| Resource::parse(entry))
            .collect()
    }

    /// The path of its list across all namespaces.
    pub(super) fn path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}/{}", self.version, self.plural)
        } else {
            format!("/apis/{}/{}/{}", self.group, self.version, self.plural)
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.plural)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.plural)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_scope_resources_read_as_yurthub_writes_them() {
        let core = Resource::parse("v1/services").unwrap();
        assert_eq!(
            (core.group.as_str(), core.path()),
            ("", "/api/v1/services".to_owned())
        );
        assert_eq!(Resource::parse("/v1/services").unwrap(), core);
        let slices = Resource::parse("discovery.k8s.io/v1/endpointslices").unwrap();
        assert_eq!(slices.path(), "/apis/discovery.k8s.io/v1/endpointslices");
        assert_eq!(slices.to_string(), "discovery.k8s.io/v1/endpointslices");
        for bad in ["services", "a/b/c/d", "v1/Services", "v1/", "x/v1/svc?x"] {
            assert!(Resource::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn yurthubs_unless_given_and_an_empty_flag_is_none() {
        let given = |entries: &[&str]| {
            let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
            Resource::parse_all(Some(&entries))
        };
        let yurthubs = Resource::parse_all(None).unwrap();
        let names: Vec<String> = yurthubs.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["v1/services", "discovery.k8s.io/v1/endpointslices"]);
        assert!(given(&[""]).unwrap().is_empty());
        let services = given(&["/v1/services"]).unwrap();
        assert_eq!(services, [Resource::parse("v1/services").unwrap()]);
        assert!(given(&["v1/services", "v1/Services"]).is_err());
    }
}
