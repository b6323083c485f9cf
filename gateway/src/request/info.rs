//! RequestInfo: the Kubernetes meaning of a URL, derived as kube-apiserver's
//! `RequestInfoFactory` derives it, so that routing, caching and filtering agree with the
//! apiserver about what a request is.

use std::borrow::Cow;
use std::fmt;

use http::Method;
use percent_encoding::percent_decode_str;
use smallvec::SmallVec;

use super::list_query::ListQuery;

pub use edgegate_filter_sdk::Verb;

/// What a request asks for, as kube-apiserver's RequestInfo names it: an API verb (the one
/// type filters know verbs by too), a proxy, or nothing the apiserver names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestVerb {
    /// An API verb: get, list, watch, create, update, patch, delete, deletecollection.
    Api(Verb),
    /// `/proxy/` requests, passed to a node, pod or service.
    Proxy,
    /// A method the apiserver gives no verb (OPTIONS, CONNECT, …).
    Unknown,
}

impl RequestVerb {
    /// The verb as Kubernetes spells it (`deletecollection`, `proxy`, …); empty if unknown.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestVerb::Api(verb) => verb.as_str(),
            RequestVerb::Proxy => "proxy",
            RequestVerb::Unknown => "",
        }
    }

    /// The API verb, if the request has one: what filters see.
    pub fn api(self) -> Option<Verb> {
        match self {
            RequestVerb::Api(verb) => Some(verb),
            RequestVerb::Proxy | RequestVerb::Unknown => None,
        }
    }

    /// The verb kube-apiserver gives a method before the path refines it.
    fn of_method(method: &Method) -> RequestVerb {
        RequestVerb::Api(match *method {
            Method::GET | Method::HEAD => Verb::Get,
            Method::POST => Verb::Create,
            Method::PUT => Verb::Update,
            Method::PATCH => Verb::Patch,
            Method::DELETE => Verb::Delete,
            _ => return RequestVerb::Unknown,
        })
    }
}

impl From<Verb> for RequestVerb {
    fn from(verb: Verb) -> RequestVerb {
        RequestVerb::Api(verb)
    }
}

/// `info.verb == Verb::Watch`: whether the request has that API verb.
impl PartialEq<Verb> for RequestVerb {
    fn eq(&self, verb: &Verb) -> bool {
        *self == RequestVerb::Api(*verb)
    }
}

impl fmt::Display for RequestVerb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The Kubernetes meaning of one request URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the path names an API resource (`/api/...`, `/apis/...`) rather than
    /// `/healthz`, `/version`, discovery documents and the like.
    pub is_resource_request: bool,
    /// The verb; for a non-resource request, the verb of its method.
    pub verb: RequestVerb,
    /// `api` for the core group, `apis` for the others; empty for non-resource requests.
    pub api_prefix: &'static str,
    /// API group; empty for the core group.
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Namespace; empty for cluster-scoped and all-namespace requests.
    pub namespace: String,
    /// Resource (plural, lowercase), e.g. `pods`.
    pub resource: String,
    /// Subresource, e.g. `status`, `log`, `exec`.
    pub subresource: String,
    /// Object name; for a list or watch, the name an exact `metadata.name` field selector gives.
    pub name: String,
}

/// Path segments that take the place of a verb (`/api/v1/watch/pods`).
const SPECIAL_VERBS: [&str; 2] = ["proxy", "watch"];
/// Subresources of a namespace itself, not resources inside it.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

impl RequestInfo {
    fn non_resource(verb: RequestVerb) -> RequestInfo {
        RequestInfo {
            is_resource_request: false,
            verb,
            api_prefix: "",
            api_group: String::new(),
            api_version: String::new(),
            namespace: String::new(),
            resource: String::new(),
            subresource: String::new(),
            name: String::new(),
        }
    }

    /// Derives the RequestInfo of a method, a path and a raw (still encoded) query.
    pub fn parse(method: &Method, path: &str, query: Option<&str>) -> RequestInfo {
        RequestInfo::of(method, path, &ListQuery::parse(query))
    }

    /// Derives the RequestInfo of a method, a path and the request's parsed list options.
    pub fn of(method: &Method, path: &str, query: &ListQuery) -> RequestInfo {
        let verb = RequestVerb::of_method(method);
        // A resource path has eight segments at most (a namespaced object's subresource
        // under `/apis`), which stay on the stack; a proxied path may go on.
        let segments: SmallVec<[Cow<'_, str>; 8]> = path
            .trim_matches('/')
            .split('/')
            .map(|s| percent_decode_str(s).decode_utf8_lossy())
            .collect();
        let non_resource = RequestInfo::non_resource(verb);

        let (api_prefix, rest) = match segments.split_first() {
            Some((prefix, rest)) if prefix == "api" => ("api", rest),
            Some((prefix, rest)) if prefix == "apis" => ("apis", rest),
            _ => return non_resource,
        };
        // /api/{version}/... needs a version and a resource; /apis/{group}/{version}/... a group too.
        let (group, version, mut parts) = match (api_prefix, rest) {
            ("api", [version, parts @ ..]) if !parts.is_empty() => ("", version.as_ref(), parts),
            ("apis", [group, version, parts @ ..]) if !parts.is_empty() => {
                (group.as_ref(), version.as_ref(), parts)
            }
            _ => return non_resource,
        };

        let mut info = RequestInfo {
            is_resource_request: true,
            api_prefix,
            api_group: group.to_owned(),
            api_version: version.to_owned(),
            ..non_resource
        };

        if SPECIAL_VERBS.contains(&parts[0].as_ref()) {
            if parts.len() < 2 {
                return RequestInfo::non_resource(verb);
            }
            info.verb = if parts[0] == "watch" {
                RequestVerb::Api(Verb::Watch)
            } else {
                RequestVerb::Proxy
            };
            parts = &parts[1..];
        }

        if parts[0] == "namespaces" && parts.len() > 1 {
            info.namespace = parts[1].to_string();
            if parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2].as_ref()) {
                parts = &parts[2..];
            }
        }

        if parts.len() >= 3 && info.verb != RequestVerb::Proxy {
            info.subresource = parts[2].to_string();
        }
        if parts.len() >= 2 {
            info.name = parts[1].to_string();
        }
        info.resource = parts[0].to_string();

        if info.name.is_empty() && info.verb == Verb::Get {
            info.verb = RequestVerb::Api(if query.watch { Verb::Watch } else { Verb::List });
            if let Some(name) = &query.exact_name {
                info.name = name.clone();
            }
        }
        if info.name.is_empty() && info.verb == Verb::Delete {
            info.verb = RequestVerb::Api(Verb::DeleteCollection);
        }
        info
    }
}

#[cfg(test)]
mod tests;
