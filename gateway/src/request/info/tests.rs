use super::*;

/// One row: method, path, query → the fields kube-apiserver derives.
struct Case {
    method: Method,
    path: &'static str,
    query: Option<&'static str>,
    resource_request: bool,
    verb: RequestVerb,
    group: &'static str,
    version: &'static str,
    namespace: &'static str,
    resource: &'static str,
    subresource: &'static str,
    name: &'static str,
}

fn case(method: Method, path: &'static str, query: Option<&'static str>) -> Case {
    Case {
        method,
        path,
        query,
        resource_request: true,
        verb: RequestVerb::Unknown,
        group: "",
        version: "v1",
        namespace: "",
        resource: "",
        subresource: "",
        name: "",
    }
}

impl Case {
    fn verb(mut self, verb: impl Into<RequestVerb>) -> Self {
        self.verb = verb.into();
        self
    }
    fn gv(mut self, group: &'static str, version: &'static str) -> Self {
        self.group = group;
        self.version = version;
        self
    }
    fn ns(mut self, namespace: &'static str) -> Self {
        self.namespace = namespace;
        self
    }
    fn res(mut self, resource: &'static str) -> Self {
        self.resource = resource;
        self
    }
    fn sub(mut self, subresource: &'static str) -> Self {
        self.subresource = subresource;
        self
    }
    fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }
    fn non_resource(mut self, verb: impl Into<RequestVerb>) -> Self {
        self.resource_request = false;
        self.verb = verb.into();
        self.version = "";
        self
    }
}

const GET: Method = Method::GET;
const POST: Method = Method::POST;
const PUT: Method = Method::PUT;
const PATCH: Method = Method::PATCH;
const DELETE: Method = Method::DELETE;

fn cases() -> Vec<Case> {
    vec![
        // kubelet
        case(GET, "/api/v1/nodes/edge-1", None)
            .verb(Verb::Get)
            .res("nodes")
            .name("edge-1"),
        case(PATCH, "/api/v1/nodes/edge-1/status", None)
            .verb(Verb::Patch)
            .res("nodes")
            .name("edge-1")
            .sub("status"),
        case(GET, "/api/v1/pods", Some("fieldSelector=spec.nodeName%3Dedge-1&limit=500&resourceVersion=0"))
            .verb(Verb::List)
            .res("pods"),
        case(GET, "/api/v1/pods", Some("allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dedge-1&resourceVersion=4711&timeoutSeconds=366&watch=true"))
            .verb(Verb::Watch)
            .res("pods"),
        case(PUT, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/edge-1", None)
            .verb(Verb::Update)
            .gv("coordination.k8s.io", "v1")
            .ns("kube-node-lease")
            .res("leases")
            .name("edge-1"),
        case(GET, "/api/v1/namespaces/kube-system/configmaps", Some("fieldSelector=metadata.name%3Dkube-proxy&limit=500&resourceVersion=0"))
            .verb(Verb::List)
            .ns("kube-system")
            .res("configmaps")
            .name("kube-proxy"),
        case(GET, "/api/v1/namespaces/kube-system/configmaps", Some("fieldSelector=metadata.name%3D%3Dkube-proxy&watch=1"))
            .verb(Verb::Watch)
            .ns("kube-system")
            .res("configmaps")
            .name("kube-proxy"),
        case(POST, "/api/v1/namespaces/default/serviceaccounts/default/token", None)
            .verb(Verb::Create)
            .ns("default")
            .res("serviceaccounts")
            .name("default")
            .sub("token"),
        // kube-proxy and coredns
        case(GET, "/apis/discovery.k8s.io/v1beta1/endpointslices", Some("labelSelector=%21service.kubernetes.io%2Fheadless&limit=500"))
            .verb(Verb::List)
            .gv("discovery.k8s.io", "v1beta1")
            .res("endpointslices"),
        case(GET, "/api/v1/services", Some("watch=true&resourceVersion=12"))
            .verb(Verb::Watch)
            .res("services"),
        case(GET, "/api/v1/watch/namespaces/default/pods", None)
            .verb(Verb::Watch)
            .ns("default")
            .res("pods"),
        case(GET, "/api/v1/watch/pods/p1", None)
            .verb(Verb::Watch)
            .res("pods")
            .name("p1"),
        // kubectl
        case(DELETE, "/api/v1/namespaces/default/configmaps/c1", None)
            .verb(Verb::Delete)
            .ns("default")
            .res("configmaps")
            .name("c1"),
        case(DELETE, "/api/v1/namespaces/default/configmaps", Some("labelSelector=app%3Dx"))
            .verb(Verb::DeleteCollection)
            .ns("default")
            .res("configmaps"),
        case(GET, "/api/v1/namespaces/default/pods/p1/log", Some("follow=true"))
            .verb(Verb::Get)
            .ns("default")
            .res("pods")
            .name("p1")
            .sub("log"),
        case(POST, "/api/v1/namespaces/default/pods/p1/exec", Some("command=sh&stdin=true"))
            .verb(Verb::Create)
            .ns("default")
            .res("pods")
            .name("p1")
            .sub("exec"),
        case(GET, "/api/v1/namespaces/default/services/web:http/proxy/metrics", None)
            .verb(Verb::Get)
            .ns("default")
            .res("services")
            .name("web:http")
            .sub("proxy"),
        case(GET, "/api/v1/proxy/namespaces/default/pods/p1/a/b", None)
            .verb(RequestVerb::Proxy)
            .ns("default")
            .res("pods")
            .name("p1"),
        // namespaces are both a resource and a scope
        case(GET, "/api/v1/namespaces", None)
            .verb(Verb::List)
            .res("namespaces"),
        case(GET, "/api/v1/namespaces/default", None)
            .verb(Verb::Get)
            .ns("default")
            .res("namespaces")
            .name("default"),
        case(PUT, "/api/v1/namespaces/old/finalize", None)
            .verb(Verb::Update)
            .ns("old")
            .res("namespaces")
            .name("old")
            .sub("finalize"),
        case(GET, "/apis/apps.openyurt.io/v1beta1/nodepools/hangzhou", None)
            .verb(Verb::Get)
            .gv("apps.openyurt.io", "v1beta1")
            .res("nodepools")
            .name("hangzhou"),
        // percent-encoded names are decoded
        case(GET, "/api/v1/namespaces/default/configmaps/a%3Ab", None)
            .verb(Verb::Get)
            .ns("default")
            .res("configmaps")
            .name("a:b"),
        // an unparseable watch value other than false/0 still means watch
        case(GET, "/api/v1/pods", Some("watch=yes"))
            .verb(Verb::Watch)
            .res("pods"),
        case(GET, "/api/v1/pods", Some("watch=false"))
            .verb(Verb::List)
            .res("pods"),
        // an inequality or an invalid name pins nothing
        case(GET, "/api/v1/pods", Some("fieldSelector=metadata.name%21%3Dx"))
            .verb(Verb::List)
            .res("pods"),
        case(GET, "/api/v1/pods", Some("fieldSelector=metadata.name%3D.."))
            .verb(Verb::List)
            .res("pods"),
        // non-resource paths
        case(GET, "/healthz", None).non_resource(Verb::Get),
        case(GET, "/version", None).non_resource(Verb::Get),
        case(GET, "/api", None).non_resource(Verb::Get),
        case(GET, "/api/v1", None).non_resource(Verb::Get),
        case(GET, "/apis/apps/v1", None).non_resource(Verb::Get),
        case(GET, "/openapi/v2", None).non_resource(Verb::Get),
        case(GET, "/api/v1/watch", None).non_resource(Verb::Get),
        case(GET, "/", None).non_resource(Verb::Get),
        case(Method::OPTIONS, "/healthz", None).non_resource(RequestVerb::Unknown),
        case(GET, "//%%%/../", None).non_resource(Verb::Get),
    ]
}

#[test]
fn request_info_matches_kube_apiserver_for_real_paths() {
    for c in cases() {
        let info = RequestInfo::parse(&c.method, c.path, c.query);
        let want = (
            c.resource_request,
            c.verb,
            c.group,
            c.version,
            c.namespace,
            c.resource,
            c.subresource,
            c.name,
        );
        let got = (
            info.is_resource_request,
            info.verb,
            info.api_group.as_str(),
            info.api_version.as_str(),
            info.namespace.as_str(),
            info.resource.as_str(),
            info.subresource.as_str(),
            info.name.as_str(),
        );
        assert_eq!(got, want, "{} {} ?{:?}", c.method, c.path, c.query);
    }
}

#[test]
fn api_prefix_tells_the_core_group() {
    let core = RequestInfo::parse(&GET, "/api/v1/pods", None);
    let apps = RequestInfo::parse(&GET, "/apis/apps/v1/deployments", None);
    assert_eq!((core.api_prefix, apps.api_prefix), ("api", "apis"));
}
