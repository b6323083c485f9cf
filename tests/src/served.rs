//! The Service the bridge pod backs: selected by the pod's label, so the cloud's endpoint
//! controllers name the pod (its address, its `targetRef`) in its EndpointSlice, and the
//! node reaches it at its ClusterIP through kube-proxy's rules.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use crate::Testbed;
use crate::node::GATEWAY_URL;
use crate::process::wait_until;
use crate::scenario;

/// The Service's name.
pub const SERVED: &str = "bridge-web";

/// The pod behind it, which serves HTTP on port 80.
pub const BACKEND: &str = "bridge";

/// The user agent of kubelet's reads and writes.
pub const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";

/// The user agent of kube-proxy's reads.
pub const KUBE_PROXY: &str = "kube-proxy/v1.20.2 (linux/amd64) kubernetes/faecb19";

/// The user agent of a node-local CoreDNS, which reads Services and (v1) Endpoints.
pub const COREDNS: &str = "coredns/1.8.0 (linux/amd64) kubernetes/faecb19";

/// A Service `name` on port 80 (`http`) selecting the pods labelled `app: {app}`: the
/// cloud's endpoint controllers make its EndpointSlices, naming those pods.
pub fn selecting(name: &str, app: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "selector": {"app": app},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}],
        },
    })
    .to_string()
}

/// The pod behind the Service, on the CNI bridge: busybox's httpd answers on port 80.
pub fn backend_pod() -> serde_json::Value {
    let mut pod = scenario::pod(BACKEND, false);
    pod["spec"]["containers"][0]["command"] =
        serde_json::json!(["/bin/httpd", "-f", "-p", "80", "-h", "/"]);
    pod
}

/// Creates the Service in the cloud; its ClusterIP.
pub fn create(testbed: &Testbed) -> Result<String> {
    testbed.cloud.cluster.apply(&selecting(SERVED, BACKEND))?;
    cluster_ip(testbed)
}

/// The backend's address as the cloud has it (empty when it has none).
pub fn cloud_address(testbed: &Testbed) -> Result<String> {
    let ip = testbed.cloud.kubectl(&[
        "get",
        "pod",
        BACKEND,
        "-n",
        "default",
        "-o",
        "jsonpath={.status.podIP}",
    ])?;
    Ok(ip.trim().to_owned())
}

/// The cloud's EndpointSlices of [`SERVED`].
pub fn cloud_slices(testbed: &Testbed) -> Result<serde_json::Value> {
    let selector = format!("kubernetes.io/service-name={SERVED}");
    let text = testbed.cloud.kubectl(&[
        "get",
        "endpointslices",
        "-n",
        "default",
        "-l",
        &selector,
        "-o",
        "json",
    ])?;
    Ok(serde_json::from_str(&text)?)
}

/// Waits until the backend, read through edgegate as kubelet, is `Ready` at an address
/// other than `old`; that address.
pub fn new_address(testbed: &Testbed, old: &str) -> Result<String> {
    let path = format!("/api/v1/namespaces/default/pods/{BACKEND}");
    let agent = KUBELET;
    let mut seen = serde_json::Value::Null;
    let found = wait_until(
        Duration::from_secs(90),
        "the bridge pod's new address",
        || {
            let Ok(pod) = read_through_gateway(testbed, agent, &path) else {
                return false;
            };
            let ready = pod["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            let moved = pod["status"]["podIP"]
                .as_str()
                .is_some_and(|ip| !ip.is_empty() && ip != old);
            seen = pod;
            ready && moved
        },
    );
    found.with_context(|| format!("the pod read through edgegate: {}", seen["status"]))?;
    Ok(seen["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// The Service's ClusterIP, as the cloud gave it.
pub fn cluster_ip(testbed: &Testbed) -> Result<String> {
    let ip = testbed.cloud.kubectl(&[
        "get",
        "service",
        SERVED,
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ])?;
    ensure!(!ip.trim().is_empty(), "{SERVED} has no ClusterIP");
    Ok(ip.trim().to_owned())
}

/// Whether an HTTP request from the node to `ip` (port 80) is answered at all: the
/// backend's busybox httpd answers any path, if only with 404.
pub fn answers(testbed: &Testbed, ip: &str) -> bool {
    let url = format!("http://{ip}/");
    testbed
        .node
        .run(
            "curl",
            &[
                "-s",
                "-m",
                "2",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                &url,
            ],
        )
        .is_ok_and(|code| code.trim() != "000" && !code.trim().is_empty())
}

/// Waits until the node reaches the Service at `ip`; how long that took. Not an assertion
/// on time: `guard` only bounds a hang.
pub fn wait_answers(testbed: &Testbed, ip: &str, guard: Duration) -> Result<Duration> {
    let start = Instant::now();
    let what = format!("the node to reach {SERVED} at {ip}");
    wait_until(guard, &what, || answers(testbed, ip))
        .with_context(|| testbed.node.log_tail("kube-proxy", 20))?;
    Ok(start.elapsed())
}

/// `GET path` through the gateway's plain proxy inside the node, as `agent`: the JSON body.
pub fn read_through_gateway(
    testbed: &Testbed,
    agent: &str,
    path: &str,
) -> Result<serde_json::Value> {
    let url = format!("{GATEWAY_URL}{path}");
    let out = testbed.node.run(
        "curl",
        &[
            "-s",
            "-m",
            "5",
            "-A",
            agent,
            "-H",
            "Accept: application/json",
            "-w",
            "\n%{http_code}",
            &url,
        ],
    )?;
    let (body, status) = out.rsplit_once('\n').context("curl printed no status")?;
    ensure!(status.trim() == "200", "{path} as {agent}: {status} {body}");
    Ok(serde_json::from_str(body)?)
}

/// `method path` with `body` of `content_type` through the gateway's plain proxy inside the
/// node, as `agent`: the JSON body of a `200` answer.
pub fn write_through_gateway(
    testbed: &Testbed,
    agent: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> Result<serde_json::Value> {
    let url = format!("{GATEWAY_URL}{path}");
    let content_type = format!("Content-Type: {content_type}");
    let out = testbed.node.run(
        "curl",
        &[
            "-s",
            "-m",
            "5",
            "-X",
            method,
            "-A",
            agent,
            "-H",
            "Accept: application/json",
            "-H",
            &content_type,
            "--data-binary",
            body,
            "-w",
            "\n%{http_code}",
            &url,
        ],
    )?;
    let (answer, status) = out.rsplit_once('\n').context("curl printed no status")?;
    ensure!(
        status.trim() == "200",
        "{method} {path} as {agent}: {status} {answer}"
    );
    Ok(serde_json::from_str(answer)?)
}

/// The addresses of the endpoints in `slices` (a list of EndpointSlices) that name
/// [`BACKEND`] in their `targetRef`, each with whether it is ready.
pub fn backend_addresses(slices: &serde_json::Value) -> Vec<(String, bool)> {
    backend_addresses_of(slices, BACKEND)
}

/// The addresses of the endpoints in `slices` (a list of EndpointSlices) that name pod
/// `pod` in their `targetRef`, each with whether it is ready.
pub fn backend_addresses_of(slices: &serde_json::Value, pod: &str) -> Vec<(String, bool)> {
    slices["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|slice| slice["endpoints"].as_array().into_iter().flatten())
        .filter(|endpoint| endpoint["targetRef"]["name"] == pod)
        .flat_map(|endpoint| {
            let ready = endpoint["conditions"]["ready"] == true;
            endpoint["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str())
                .map(move |a| (a.to_owned(), ready))
        })
        .collect()
}

/// The addresses of pod `pod` in `endpoints` (a list of v1 Endpoints), each with whether it
/// is ready (under `addresses`) or not (under `notReadyAddresses`).
pub fn endpoints_addresses_of(endpoints: &serde_json::Value, pod: &str) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    for object in endpoints["items"].as_array().into_iter().flatten() {
        for subset in object["subsets"].as_array().into_iter().flatten() {
            for (field, ready) in [("addresses", true), ("notReadyAddresses", false)] {
                found.extend(
                    subset[field]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|address| address["targetRef"]["name"] == pod)
                        .filter_map(|address| address["ip"].as_str())
                        .map(|ip| (ip.to_owned(), ready)),
                );
            }
        }
    }
    found
}

/// The path of Service `service`'s v1 Endpoints, as a list (as CoreDNS reads them).
pub fn endpoints_path(service: &str) -> String {
    format!("/api/v1/namespaces/default/endpoints?fieldSelector=metadata.name%3D{service}")
}

/// The path of every v1 Endpoints object, as CoreDNS lists them: the set the gateway
/// caches for it, which covers [`endpoints_path`].
pub const ALL_ENDPOINTS: &str = "/api/v1/endpoints";

/// The path of [`SERVED`]'s EndpointSlices (Kubernetes 1.20 serves `v1beta1`).
pub fn slices_path() -> String {
    format!(
        "/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D{SERVED}"
    )
}

/// kube-proxy's rules apart from those of [`SERVED`]: its lines, and every line naming one
/// of the chains they jump to (its endpoints' chains, named after their addresses).
pub fn rules_apart_from_served(rules: &[String]) -> Vec<String> {
    let comment = format!("default/{SERVED}:http");
    let chains: Vec<&str> = rules
        .iter()
        .filter(|line| line.contains(&comment))
        .flat_map(|line| line.split_whitespace())
        .filter(|word| word.starts_with("KUBE-SEP-"))
        .collect();
    rules
        .iter()
        .filter(|line| !line.contains(&comment))
        .filter(|line| !chains.iter().any(|chain| line.contains(chain)))
        .cloned()
        .collect()
}
