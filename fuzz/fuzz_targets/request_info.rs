//! RequestInfo from a method, a path and a query, as the gateway reads every request at
//! its door. Invariants: the parse through a `Uri` agrees with the parse of its parts; a
//! non-resource request says nothing of resources; list, watch and deletecollection come
//! only from their methods; and a resource request written back as its canonical path
//! parses to the same RequestInfo.
#![no_main]

use edgegate::request::{ListQuery, RequestContext, RequestInfo, RequestVerb, Verb};
use http::{HeaderMap, Method, Uri};
use libfuzzer_sys::fuzz_target;

/// Methods kube-apiserver names, and one it does not.
const METHODS: [Method; 8] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
    Method::CONNECT,
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let method = &METHODS[usize::from(selector) % METHODS.len()];
    let text = String::from_utf8_lossy(rest);
    let (path, query) = match text.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (text.as_ref(), None),
    };
    let info = RequestInfo::parse(method, path, query);
    check(method, path, &info, &ListQuery::parse(query));

    // What hyper hands the gateway: a target it accepted as a URI.
    if let Ok(uri) = text.parse::<Uri>()
        && uri.scheme().is_none()
    {
        let context = RequestContext::parse(method, &uri, &HeaderMap::new());
        assert_eq!(
            context.info,
            RequestInfo::parse(method, uri.path(), uri.query()),
            "{uri}"
        );
    }
});

fn check(method: &Method, path: &str, info: &RequestInfo, query: &ListQuery) {
    let reads = *method == Method::GET || *method == Method::HEAD;
    match info.verb.api() {
        Some(Verb::List | Verb::Watch) => assert!(reads || info.verb == Verb::Watch, "{info:?}"),
        Some(Verb::DeleteCollection) => assert_eq!(*method, Method::DELETE),
        _ => {}
    }
    if info.verb == Verb::List {
        assert!(!query.watch, "a list with watch=true: {info:?}");
    }
    if !info.is_resource_request {
        assert_eq!(info.api_prefix, "");
        for field in [
            &info.api_group,
            &info.api_version,
            &info.namespace,
            &info.resource,
            &info.subresource,
            &info.name,
        ] {
            assert!(field.is_empty(), "{info:?}");
        }
        return;
    }
    assert!(["api", "apis"].contains(&info.api_prefix), "{info:?}");
    if info.api_prefix == "api" {
        assert!(info.api_group.is_empty(), "{info:?}");
    }
    // A subresource of no name comes only from an empty name in the path (`pods//log`), as
    // kube-apiserver reads it too.
    if !info.subresource.is_empty() && info.name.is_empty() {
        assert!(
            path.trim_matches('/').contains("//"),
            "a subresource of nothing: {info:?}"
        );
        return;
    }
    round_trip(method, info, query);
}

/// The canonical path of a plain resource request parses back to the same RequestInfo.
fn round_trip(method: &Method, info: &RequestInfo, query: &ListQuery) {
    // Names from a field selector or a `/watch/` path, and proxies, have no one path;
    // segments that would read as something else (a namespace's own subresources, the
    // special verbs, segments that split or decode) are left out.
    let plain = |s: &str| !s.is_empty() && !s.contains(['/', '%']);
    let special = ["namespaces", "status", "finalize", "watch", "proxy"];
    if query.exact_name.is_some()
        || query.watch
        || matches!(info.verb, RequestVerb::Api(Verb::Watch) | RequestVerb::Proxy)
        || !plain(&info.api_version)
        || !plain(&info.resource)
        || special.contains(&info.resource.as_str())
        || (info.api_prefix == "apis" && !plain(&info.api_group))
        || [&info.namespace, &info.name, &info.subresource]
            .iter()
            .any(|s| !s.is_empty() && !plain(s))
    {
        return;
    }
    let mut path = format!("/{}", info.api_prefix);
    if info.api_prefix == "apis" {
        path = format!("{path}/{}", info.api_group);
    }
    path = format!("{path}/{}", info.api_version);
    if !info.namespace.is_empty() {
        path = format!("{path}/namespaces/{}", info.namespace);
    }
    path = format!("{path}/{}", info.resource);
    for part in [&info.name, &info.subresource] {
        if !part.is_empty() {
            path = format!("{path}/{part}");
        }
    }
    let again = RequestInfo::of(method, &path, query);
    assert_eq!(&again, info, "{path}");
}
