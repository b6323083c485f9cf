//! One request as the gateway reads it, parsed once at the door and handed to everything
//! that decides about it: the plan, the filter session, the cache policy, the local proxy
//! and the end of a watch.

use http::{HeaderMap, Method, Uri};

use super::accept::{Answered, Shape, negotiate};
use super::component::component_of;
use super::info::RequestInfo;
use super::list_query::ListQuery;

/// A request's meaning, its sender and its list options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestContext {
    /// What it is: verb, group, version, resource, namespace, name.
    pub info: RequestInfo,
    /// The component that sent it, as filters see it.
    pub component: String,
    /// The component it is cached for: the component, or its caller's partition.
    pub cache_component: String,
    /// Its list options.
    pub query: ListQuery,
    /// What it takes back, should the gateway answer it.
    pub answered: Answered,
    /// The form it takes objects in: whole, or their metadata alone.
    pub shape: Shape,
}

impl RequestContext {
    /// Reads a request's method, target and headers; cached for its component until
    /// [`RequestContext::cached_for`] says otherwise.
    pub fn parse(method: &Method, uri: &Uri, headers: &HeaderMap) -> RequestContext {
        let query = ListQuery::parse(uri.query());
        let component = component_of(headers);
        let (answered, shape) = negotiate(headers);
        RequestContext {
            info: RequestInfo::of(method, uri.path(), &query),
            cache_component: component.clone(),
            component,
            query,
            answered,
            shape,
        }
    }

    /// The same request cached for `cache_component`.
    pub fn cached_for(self, cache_component: String) -> RequestContext {
        RequestContext {
            cache_component,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Verb;

    #[test]
    fn one_parse_gives_the_verb_the_component_and_the_list_options() {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::USER_AGENT,
            "kube-proxy/v1.20".parse().unwrap(),
        );
        let uri: Uri = "/api/v1/services?watch=true&labelSelector=a%3Db&resourceVersion=7"
            .parse()
            .unwrap();
        let request = RequestContext::parse(&Method::GET, &uri, &headers);
        assert_eq!(request.info.verb, Verb::Watch);
        assert_eq!(request.info.resource, "services");
        assert_eq!(request.component, "kube-proxy");
        assert_eq!(request.cache_component, "kube-proxy");
        assert_eq!(request.query.labels, "a=b");
        assert_eq!(request.query.resource_version.as_deref(), Some("7"));
        let partition = request.cached_for("kube-proxy@abc".into());
        assert_eq!(
            (
                partition.component.as_str(),
                partition.cache_component.as_str()
            ),
            ("kube-proxy", "kube-proxy@abc")
        );
    }
}
