//! A watch the gateway frames crosses the edge link in protobuf: the gateway asks
//! kube-apiserver for Services and EndpointSlices in protobuf and hands its clients, its
//! filters and its cache the JSON kube-apiserver would have sent; a watch it refuses reaches
//! its client as a JSON `Status`.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use edgegate_testkit::{Gateway, NOBODY_TOKEN, Relay};
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::support::{Env, Watch, client, namespace, request, runtime};

const KUBE_PROXY: &str = "kube-proxy/v1.20.2 (linux/amd64) kubernetes/faecb19";

/// Changes of the EndpointSlice the watches read.
const CHANGES: usize = 20;

fn service(ns: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": ns, "labels": {"app": "web"},
                     "annotations": {"note": "<&> \"quoted\" ü"}},
        "spec": {
            "selector": {"app": "web"},
            "ports": [
                {"name": "http", "port": 80, "targetPort": 8080},
                {"name": "admin", "port": 81, "targetPort": "admin", "protocol": "UDP"},
            ],
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
            "publishNotReadyAddresses": true,
        }
    })
    .to_string()
}

fn slice(ns: &str, change: usize) -> String {
    let endpoints: Vec<Value> = (0..12)
        .map(|i| {
            json!({
                "addresses": [format!("198.18.{change}.{i}")],
                "conditions": {"ready": i % 3 != 0},
                "hostname": format!("web-{i}"),
                "targetRef": {"kind": "Pod", "namespace": ns, "name": format!("web-{i}")},
                "topology": {"kubernetes.io/hostname": format!("node-{}", i % 4)},
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1beta1", "kind": "EndpointSlice",
        "metadata": {"name": "web-abc", "namespace": ns,
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    })
    .to_string()
}

/// Whether `ours` is `theirs`, but for a `null` of theirs that ours leaves out (an empty
/// list without `omitempty`, which protobuf cannot carry).
fn covers(theirs: &Value, ours: &Value, at: &str) -> Result<()> {
    match (theirs, ours) {
        (Value::Object(theirs), Value::Object(ours)) => {
            for (key, value) in theirs {
                match ours.get(key) {
                    Some(mine) => covers(value, mine, &format!("{at}.{key}"))?,
                    None => ensure!(value.is_null(), "{at}.{key} missing"),
                }
            }
            for (key, value) in ours {
                ensure!(
                    theirs.contains_key(key),
                    "{at}.{key} = {value} is not kube-apiserver's"
                );
            }
            Ok(())
        }
        (Value::Array(theirs), Value::Array(ours)) => {
            ensure!(
                theirs.len() == ours.len(),
                "{at}: {} items, not {}",
                ours.len(),
                theirs.len()
            );
            for (i, (a, b)) in theirs.iter().zip(ours).enumerate() {
                covers(a, b, &format!("{at}[{i}]"))?;
            }
            Ok(())
        }
        _ => {
            ensure!(theirs == ours, "{at}: {ours}, not {theirs}");
            Ok(())
        }
    }
}

pub fn watches_cross_the_edge_link_in_protobuf_and_reach_clients_as_json(env: &Env) -> Result<()> {
    let relay = Relay::start(([127, 0, 0, 1], env.cluster.port).into())?;
    // Each client's watch its own upstream watch, so that the bytes are the one watch's.
    let gateway = Gateway::start_to(
        &env.bin,
        &env.cluster,
        &relay.url(),
        &["--heartbeat-interval-seconds=1", "--pool-scope-resources="],
    )?;
    let ns = namespace(&env.cluster, "protobuf")?;
    let listed: Value = serde_json::from_str(&env.cluster.kubectl(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/{ns}/services"),
    ])?)?;
    let since = listed["metadata"]["resourceVersion"]
        .as_str()
        .context("a list without its version")?
        .to_owned();
    let paths = [
        format!("/api/v1/namespaces/{ns}/services"),
        format!("/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices"),
    ];
    let rt = runtime();
    let client = client();
    let mut watches = Vec::new();
    for path in &paths {
        let url = format!("{}{path}?watch=true&resourceVersion={since}", gateway.url());
        watches.push(rt.block_on(Watch::open(&client, &url, KUBE_PROXY))?);
    }
    let before = relay.bytes_down();
    env.cluster.apply(&service(&ns))?;
    for change in 0..CHANGES {
        env.cluster.apply(&slice(&ns, change))?;
    }
    let mut through = Vec::new();
    for (watch, expected) in watches.iter_mut().zip([1, CHANGES]) {
        let mut events = Vec::new();
        while events.len() < expected {
            let event = rt
                .block_on(watch.next(Duration::from_secs(30)))?
                .context("the watch through the gateway ended")?;
            events.push(event);
        }
        through.push(events);
    }
    let carried = relay.bytes_down() - before;

    // The same events straight from kube-apiserver, as JSON.
    let mut json_bytes = 0;
    for (path, ours) in paths.iter().zip(&through) {
        let raw = env.cluster.kubectl(&[
            "get",
            "--raw",
            &format!("{path}?watch=true&resourceVersion={since}&timeoutSeconds=2"),
        ])?;
        json_bytes += raw.len();
        let theirs: Vec<Value> = raw
            .lines()
            .filter(|l| !l.is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()?;
        // The events, in order, one for one.
        covers(&Value::from(theirs), &Value::from(ours.clone()), path)?;
    }
    // Some endpoints are not ready: a pointer set to false crossed as such.
    let last = &through[1][CHANGES - 1]["object"]["endpoints"];
    ensure!(last[0]["conditions"]["ready"] == false, "{last}");
    eprintln!(
        "{} events: {json_bytes} bytes as JSON, {carried} bytes over the edge link",
        CHANGES + 1
    );
    // Protobuf names each field by a number and each string by its length: the changes
    // cross in well under their JSON's bytes, TLS and HTTP framing included.
    ensure!(
        carried * 4 < json_bytes as u64 * 3,
        "the link carried {carried} bytes for {json_bytes} bytes of JSON events"
    );

    // A watch kube-apiserver refuses (a user it does not authorize) is refused in protobuf,
    // and reaches its JSON client as a JSON `Status`.
    for path in &paths {
        let url = format!("{}{path}?watch=true&timeoutSeconds=20", gateway.url());
        let sent = request(
            http::Method::GET,
            &url,
            Some(NOBODY_TOKEN),
            KUBE_PROXY,
            None,
        )?;
        let (status, body) = rt.block_on(async {
            let response = client.request(sent).await?;
            let status = response.status();
            anyhow::Ok((status, response.into_body().collect().await?.to_bytes()))
        })?;
        ensure!(status == 403, "{path}: {status} for a user not authorized");
        let answer: Value = serde_json::from_slice(&body).with_context(|| {
            format!(
                "{path}: a {status} answer that is not JSON: {:?}",
                String::from_utf8_lossy(&body)
            )
        })?;
        ensure!(
            answer["kind"] == "Status" && answer["code"] == 403 && answer["reason"] == "Forbidden",
            "{path}: {answer}"
        );
    }
    Ok(())
}
