//! The three seed filters (servicetopology, masterservice, discard-cloud-service) as the
//! benchmarks run them: natively through the SDK's test harness, and as wasm components
//! through the gateway's filter host, each on the objects and paths (keep, replace, drop)
//! the benchmarks compare.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use discard_cloud_service::DiscardCloudService;
use edgegate::filter::{Generation, LabelSelector, Lookup, NodeFacts, Session};
use edgegate::request::RequestInfo;
use edgegate::stream::Verdict;
use edgegate_filter_sdk::testing::{Harness, Output};
use edgegate_filter_sdk::{Context, Filter, Level, Resource, Verb};
use masterservice::MasterService;
use serde_json::{Value, json};
use servicetopology::ServiceTopology;

use crate::fixtures::{
    ENDPOINTS_20K, NODE, NODE_LOCAL_SERVICE, PLAIN_SERVICE, ServiceKind, bytes_of, endpoint_slice,
    looked_up_services, service,
};

/// What a filter does with an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Forwards it untouched.
    Keep,
    /// Sends it rewritten.
    Replace,
    /// Leaves it out.
    Drop,
}

impl Outcome {
    /// The path's name in benchmark ids.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Keep => "keep",
            Outcome::Replace => "replace",
            Outcome::Drop => "drop",
        }
    }

    /// Whether a native output took this path.
    pub fn of_output(self, output: &Output) -> bool {
        matches!(
            (self, output),
            (Outcome::Keep, Output::Keep)
                | (Outcome::Replace, Output::Replace(_))
                | (Outcome::Drop, Output::Drop)
        )
    }
}

/// One object a filter is benchmarked on.
pub struct Case {
    /// The object's name in benchmark ids, e.g. `endpointslice-2k`.
    pub object: &'static str,
    /// The path the filter takes on it.
    pub path: Outcome,
    /// The object as kube-apiserver sends it.
    pub bytes: Bytes,
}

/// A seed filter and the request it is benchmarked on.
pub struct Seed {
    /// The filter's name: its crate and its `.wasm`.
    pub name: &'static str,
    /// The component that asks.
    pub component: &'static str,
    /// API group, version and resource of the request.
    pub gvr: (&'static str, &'static str, &'static str),
    /// The request path (a LIST).
    pub url_path: &'static str,
    /// The objects and paths.
    pub cases: Vec<Case>,
}

/// The three seed filters with their cases: 2 KB and 20 KB objects, keep and replace (or
/// drop, for the filter that only drops).
pub fn seeds() -> Vec<Seed> {
    let slice =
        |service: &str, endpoints: usize| bytes_of(&endpoint_slice("s-x", service, endpoints));
    let svc = |ns: &str, name: &str, kind: ServiceKind, size: usize| {
        bytes_of(&service(ns, name, kind, size))
    };
    let case = |object, path, bytes| Case {
        object,
        path,
        bytes,
    };
    vec![
        Seed {
            name: "servicetopology",
            component: "kube-proxy",
            gvr: ("discovery.k8s.io", "v1", "endpointslices"),
            url_path: "/apis/discovery.k8s.io/v1/endpointslices",
            cases: vec![
                case("endpointslice-2k", Outcome::Keep, slice(PLAIN_SERVICE, 5)),
                case(
                    "endpointslice-2k",
                    Outcome::Replace,
                    slice(NODE_LOCAL_SERVICE, 5),
                ),
                case(
                    "endpointslice-20k",
                    Outcome::Keep,
                    slice(PLAIN_SERVICE, ENDPOINTS_20K),
                ),
                case(
                    "endpointslice-20k",
                    Outcome::Replace,
                    slice(NODE_LOCAL_SERVICE, ENDPOINTS_20K),
                ),
            ],
        },
        Seed {
            name: "masterservice",
            component: "kubelet",
            gvr: ("", "v1", "services"),
            url_path: "/api/v1/services",
            cases: vec![
                case(
                    "service-2k",
                    Outcome::Keep,
                    svc("kube-system", "metrics", ServiceKind::ClusterIp, 2_000),
                ),
                case(
                    "service-2k",
                    Outcome::Replace,
                    svc("default", "kubernetes", ServiceKind::ClusterIp, 2_000),
                ),
                case(
                    "service-20k",
                    Outcome::Keep,
                    svc("kube-system", "metrics", ServiceKind::ClusterIp, 20_000),
                ),
                case(
                    "service-20k",
                    Outcome::Replace,
                    svc("default", "kubernetes", ServiceKind::ClusterIp, 20_000),
                ),
            ],
        },
        Seed {
            name: "discard-cloud-service",
            component: "kube-proxy",
            gvr: ("", "v1", "services"),
            url_path: "/api/v1/services",
            cases: vec![
                case(
                    "service-2k",
                    Outcome::Keep,
                    svc("shop", "shop-lb", ServiceKind::ClusterIp, 2_000),
                ),
                case(
                    "service-2k",
                    Outcome::Drop,
                    svc("shop", "shop-lb", ServiceKind::DiscardedLoadBalancer, 2_000),
                ),
                case(
                    "service-20k",
                    Outcome::Keep,
                    svc("shop", "shop-lb", ServiceKind::ClusterIp, 20_000),
                ),
                case(
                    "service-20k",
                    Outcome::Drop,
                    svc(
                        "shop",
                        "shop-lb",
                        ServiceKind::DiscardedLoadBalancer,
                        20_000,
                    ),
                ),
            ],
        },
    ]
}

impl Seed {
    /// The filter context the SDK harness gives the filter: a LIST on [`NODE`].
    pub fn context(&self) -> Context {
        let (group, version, resource) = self.gvr;
        Context::new(
            self.component,
            Verb::List,
            Resource::new(group, version, resource),
        )
        .node_name(NODE)
    }

    /// The filter compiled natively, run through the SDK's test harness with the Services
    /// it looks up. Installs the harness's fake host on this thread: build it right before
    /// use, one at a time.
    pub fn native(&self) -> anyhow::Result<Box<dyn NativeFilter>> {
        match self.name {
            "servicetopology" => native::<ServiceTopology>(self.context(), json!({})),
            "masterservice" => native::<MasterService>(self.context(), json!({})),
            "discard-cloud-service" => native::<DiscardCloudService>(self.context(), json!({})),
            other => anyhow::bail!("no native build of {other}"),
        }
    }

    /// The filter's component (`<dir>/<name>.wasm`) loaded by the gateway's filter host in a
    /// generation of its own, looking up the same Services.
    pub fn wasm(&self, dir: &Path, compiled_cache: Option<&Path>) -> anyhow::Result<Generation> {
        let bytes = std::fs::read(dir.join(format!("{}.wasm", self.name)))?;
        Ok(Generation::single(
            self.name,
            &bytes,
            None,
            NodeFacts::new(NODE.to_owned(), None),
            Arc::new(Services::new()),
            compiled_cache,
        )?)
    }

    /// The filtering of one response of this seed's request, from `generation`.
    pub fn session(&self, generation: &Generation) -> anyhow::Result<Session> {
        let info = RequestInfo::parse(&http::Method::GET, self.url_path, None);
        generation
            .session(&info, self.component)
            .ok_or_else(|| anyhow::anyhow!("{} does not apply to its own request", self.name))
    }
}

/// A filter run natively, object bytes in, the harness's output out.
pub trait NativeFilter {
    /// One object, as the host's `filter` call.
    fn filter(&self, object: &[u8]) -> Output;
    /// Several objects, as the host's `filter-batch` call.
    fn filter_batch(&self, objects: &[Vec<u8>]) -> Vec<Output>;
}

struct Native<F: Filter> {
    harness: Harness<F>,
    ctx: Context,
}

impl<F: Filter> NativeFilter for Native<F> {
    fn filter(&self, object: &[u8]) -> Output {
        self.harness.filter_bytes(&self.ctx, object)
    }

    fn filter_batch(&self, objects: &[Vec<u8>]) -> Vec<Output> {
        self.harness.filter_batch_bytes(&self.ctx, objects)
    }
}

fn native<F: Filter + 'static>(
    ctx: Context,
    config: Value,
) -> anyhow::Result<Box<dyn NativeFilter>> {
    let harness = Harness::<F>::configure(config).map_err(anyhow::Error::msg)?;
    // As the gateway's log at its default level: debug lines are not enabled, in both builds.
    harness.log_level(Level::Info);
    for service in looked_up_services() {
        harness.add_object(Resource::new("", "v1", "services"), service);
    }
    Ok(Box::new(Native { harness, ctx }))
}

/// Whether the wasm host's verdict and the native output are the same decision (and the same
/// bytes, for a replacement): both builds must do the same work for the comparison to hold.
pub fn same_decision(verdict: &Verdict, output: &Output) -> bool {
    match (verdict, output) {
        (Verdict::Keep, Output::Keep) | (Verdict::Drop, Output::Drop) => true,
        (Verdict::Replace(a), Output::Replace(b)) => a[..] == b[..],
        _ => false,
    }
}

/// The gateway-side lookups of the benchmarks: the Services of [`looked_up_services`].
pub struct Services {
    services: Vec<(String, String, Bytes)>,
}

impl Services {
    /// The lookups holding [`looked_up_services`].
    pub fn new() -> Services {
        let services = looked_up_services()
            .iter()
            .map(|s| {
                let at = |key: &str| s["metadata"][key].as_str().unwrap_or_default().to_owned();
                (at("namespace"), at("name"), bytes_of(s))
            })
            .collect();
        Services { services }
    }
}

impl Default for Services {
    fn default() -> Self {
        Services::new()
    }
}

impl Lookup for Services {
    fn get(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Bytes> {
        if (group, version, resource) != ("", "v1", "services") {
            return None;
        }
        self.services
            .iter()
            .find(|(ns, n, _)| Some(ns.as_str()) == namespace && n == name)
            .map(|(_, _, bytes)| bytes.clone())
    }

    fn list(&self, _: &str, _: &str, _: &str, _: Option<&str>, _: &LabelSelector) -> Vec<Bytes> {
        // The benchmarks' topologies are by hostname: nothing lists.
        Vec::new()
    }
}
