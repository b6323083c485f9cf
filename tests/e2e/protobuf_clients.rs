//! Clients that take Kubernetes' protobuf and not JSON. Online, the gateway asks the
//! apiserver for JSON, filters and caches it as for any client, and writes it in protobuf;
//! offline, it answers from the cache in protobuf. What such a client reads is what
//! kube-apiserver's own protobuf of the same objects reads as, filtered.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use edgegate::stream::protobuf_object_json;
use http_body_util::BodyExt;
use serde_json::Value;

use crate::support::{
    Env, Plain, client, create_configmaps, get_accepting, namespace, relayed_gateway_to, runtime,
    unique, wait_readyz,
};

/// The component the tagger filter serves, cached here with `--cache-agents`.
const AGENT: &str = "test/v1";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What the tagger filter (tag `t`) writes on each object it keeps.
const TRAIL: &str = "edgegate.test/trail";

/// Six ConfigMaps, one labelled for the tagger filter to drop. A kube-rs client that takes
/// only protobuf reads them through the gateway online: its list, get and watch are in
/// protobuf, filtered (the tagger's annotation on each, the dropped one absent or 404), and
/// read as kube-apiserver's own protobuf of the same objects, filtered. Its list alone fills
/// the cache. With the link cut, its list, pages, get and watch are answered from there in
/// protobuf; a client that takes neither JSON nor protobuf is `406`, and kubectl's table
/// request (plain JSON its fallback) gets JSON.
pub fn protobuf_only_clients_are_filtered_online_and_answered_offline(env: &Env) -> Result<()> {
    let (relay, gateway, path) = tagged_configmaps(env, "protobuf")?;
    let rt = runtime();
    let client = client();

    let expected = rt.block_on(async {
        let through = through_gateway(&gateway.url())?;
        let direct = direct(&env.cluster.admin_kubeconfig).await?;
        online(&through, &direct, &env.cluster, &path).await
    })?;
    crate::support::wait_sets(gateway.hub, "test", 1)?;

    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;
    let url = format!("{}{path}", gateway.url());
    let (status, offline) = rt.block_on(answer(&client, &url))?;
    ensure!(status == 200, "the offline protobuf list: {status}");
    let list = protobuf_object_json(&offline).context("the offline list reads as protobuf")?;
    ensure!(list["kind"] == "ConfigMapList", "{}", list["kind"]);
    ensure!(
        items(&list) == expected,
        "the offline list reads as the apiserver's, filtered:\n{:?}\nvs\n{expected:?}",
        items(&list)
    );
    let paged = protobuf_object_json(&rt.block_on(answer(&client, &format!("{url}?limit=2")))?.1)?;
    ensure!(
        paged["metadata"]["remainingItemCount"] == 4 && paged["metadata"]["continue"].is_string(),
        "a page in protobuf: {}",
        paged["metadata"]
    );

    let (status, one) = rt.block_on(answer(&client, &format!("{url}/p-3")))?;
    let one = protobuf_object_json(&one)?;
    ensure!(
        status == 200 && one["kind"] == "ConfigMap" && one["metadata"]["name"] == "p-3",
        "the offline get: {status} {one}"
    );

    let watch = format!("{url}?watch=true&timeoutSeconds=2&allowWatchBookmarks=true");
    let (status, frames) = rt.block_on(answer(&client, &watch))?;
    ensure!(status == 200, "the offline protobuf watch: {status}");
    let events = events(&frames)?;
    let added = events.iter().filter(|(kind, _)| kind == "ADDED").count();
    ensure!(
        added == 6 && events.last().is_some_and(|(kind, _)| kind == "BOOKMARK"),
        "every ConfigMap kept as ADDED, then a bookmark: {:?}",
        events.iter().map(|(kind, _)| kind).collect::<Vec<_>>()
    );

    let table_only = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let (status, _) = rt.block_on(get_accepting(&client, &url, AGENT, table_only))?;
    ensure!(status == 406, "a table-only client offline: {status}");
    let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let (status, body) = rt.block_on(get_accepting(&client, &url, AGENT, kubectl))?;
    let list: Value = serde_json::from_slice(&body)?;
    ensure!(
        status == 200 && list["items"].as_array().is_some_and(|i| i.len() == 6),
        "kubectl's table request falls back to JSON: {status}"
    );
    Ok(())
}

/// A gateway through a relay the test can cut, filtering the `test` component's reads with
/// the tagger (tag `t`) and caching them; five ConfigMaps and one the tagger drops, in a new
/// namespace named after `name`. Returns the relay, the gateway and the ConfigMaps' path.
pub(crate) fn tagged_configmaps(
    env: &Env,
    name: &str,
) -> Result<(edgegate_testkit::Relay, edgegate_testkit::Gateway, String)> {
    let scratch = env.cluster.dir.join(unique(name));
    let filters = crate::topology::filter_dir(&scratch, &["tagger"])?;
    std::fs::write(filters.join("tagger.toml"), "[config]\ntag = \"t\"\n")?;
    let filter_dir = format!("--filter-dir={}", filters.display());
    let flags = [
        filter_dir.as_str(),
        "--cache-agents=test",
        "--heartbeat-interval-seconds=1",
    ];
    let apiserver = ([127, 0, 0, 1], env.cluster.port).into();
    let (relay, gateway) = relayed_gateway_to(env, &env.cluster, apiserver, &flags)?;
    let ns = namespace(&env.cluster, name)?;
    let rt = runtime();
    rt.block_on(create_configmaps(&client(), &gateway.url(), &ns, "p", 5))?;
    env.cluster
        .kubectl(&["create", "configmap", "p-drop", "-n", &ns])?;
    env.cluster.kubectl(&[
        "label",
        "configmap",
        "p-drop",
        "-n",
        &ns,
        "edgegate.test/drop=t",
    ])?;
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    Ok((relay, gateway, path))
}

/// Online, through the gateway (`through`) and from kube-apiserver itself (`direct`), both
/// taking only protobuf: a watch sees a ConfigMap made while it is open, filtered; the
/// gateway's list is the apiserver's, filtered; a get of a kept ConfigMap is filtered and
/// one of the dropped is 404. Returns the filtered items, as a Go client decodes them.
async fn online(
    through: &kube::Client,
    direct: &kube::Client,
    cluster: &edgegate_testkit::Cluster,
    path: &str,
) -> Result<Vec<Value>> {
    let (_, _, first) = read(through, path).await?;
    let version = protobuf_object_json(&first)?["metadata"]["resourceVersion"].clone();
    let version = version.as_str().context("the list's version")?.to_owned();
    let watch = format!("{path}?watch=true&resourceVersion={version}&timeoutSeconds=3");
    // Made after the list: a watch from the list's version is sent it, whenever it opens.
    let ns = path.split('/').nth(4).context("the namespace")?;
    cluster.kubectl(&["create", "configmap", "p-5", "-n", ns])?;
    let (status, media, frames) = read(through, &watch).await?;
    ensure!(
        status == 200 && media == "application/vnd.kubernetes.protobuf;stream=watch",
        "the online watch: {status} {media}"
    );
    let events = events(&frames)?;
    ensure!(
        events.iter().any(|(kind, object)| kind == "ADDED"
            && object["metadata"]["name"] == "p-5"
            && object["metadata"]["annotations"][TRAIL] == "t"),
        "the online watch sends p-5, filtered: {events:?}"
    );

    let (status, _, own) = read(direct, path).await?;
    ensure!(status == 200, "the apiserver's own protobuf list: {status}");
    let expected: Vec<Value> = items(&protobuf_object_json(&own)?)
        .into_iter()
        .filter(|item| item["metadata"]["name"] != "p-drop")
        .map(|mut item| {
            item["metadata"]["annotations"][TRAIL] = "t".into();
            item
        })
        .collect();
    let (status, media, list) = read(through, path).await?;
    ensure!(
        status == 200 && media == PROTOBUF,
        "the online list: {status} {media}"
    );
    let list = items(&protobuf_object_json(&list)?);
    ensure!(
        list == expected && list.len() == 6,
        "the online list reads as the apiserver's, filtered:\n{list:?}\nvs\n{expected:?}"
    );

    let (status, _, kept) = read(through, &format!("{path}/p-1")).await?;
    let kept = protobuf_object_json(&kept)?;
    ensure!(
        status == 200 && kept["metadata"]["annotations"][TRAIL] == "t",
        "the online get: {status} {kept}"
    );
    let (status, _, _) = read(through, &format!("{path}/p-drop")).await?;
    ensure!(
        status == 404,
        "the online get of the dropped ConfigMap: {status}"
    );
    Ok(expected)
}

/// A kube-rs client to the gateway at `url`, on the admin's token.
pub(crate) fn through_gateway(url: &str) -> Result<kube::Client> {
    let mut config = kube::Config::new(url.parse()?);
    config.auth_info.token = Some(edgegate_testkit::ADMIN_TOKEN.to_owned().into());
    Ok(kube::Client::try_from(config)?)
}

/// A kube-rs client to the apiserver itself, as the admin's `kubeconfig` says.
pub(crate) async fn direct(kubeconfig: &std::path::Path) -> Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
    Ok(kube::Client::try_from(config)?)
}

/// GETs `path` with `client`, taking only protobuf, as the tagger's component: the status,
/// the `Content-Type` and the whole body.
async fn read(client: &kube::Client, path: &str) -> Result<(http::StatusCode, String, Bytes)> {
    read_as(client, path, PROTOBUF).await
}

/// GETs `path` with `client` as the tagger's component, taking `accept`: the status, the
/// `Content-Type` and the whole body.
pub(crate) async fn read_as(
    client: &kube::Client,
    path: &str,
    accept: &str,
) -> Result<(http::StatusCode, String, Bytes)> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .header(http::header::USER_AGENT, AGENT)
        .body(kube::client::Body::empty())?;
    let response = tokio::time::timeout(Duration::from_secs(30), client.send(request))
        .await
        .context("no answer in time")??;
    let status = response.status();
    let media = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = tokio::time::timeout(Duration::from_secs(30), response.into_body().collect())
        .await
        .context("no whole body in time")??
        .to_bytes();
    Ok((status, media, body))
}

/// A request accepting protobuf only, as the tagger's component; the status and the whole
/// body (a watch ends by its `timeoutSeconds`).
async fn answer(client: &Plain, url: &str) -> Result<(http::StatusCode, Bytes)> {
    tokio::time::timeout(
        Duration::from_secs(30),
        get_accepting(client, url, AGENT, PROTOBUF),
    )
    .await
    .context("no answer in time")?
}

/// A list's items as a Go client decodes them: zero members (which Go's protobuf encoder
/// writes and its JSON encoder leaves out) left out.
fn items(list: &Value) -> Vec<Value> {
    list["items"]
        .as_array()
        .map(|items| items.iter().map(without_zeros).collect())
        .unwrap_or_default()
}

fn without_zeros(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    let zero = |v: &Value| match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    };
    match value {
        Value::Object(members) => members
            .iter()
            .map(|(k, v)| (k.clone(), without_zeros(v)))
            .filter(|(_, v)| !zero(v))
            .collect(),
        Value::Array(items) => items.iter().map(without_zeros).collect(),
        other => other.clone(),
    }
}

/// A protobuf watch body's events, as (type, object): frames of a 4-byte big-endian length
/// and a `meta.v1.WatchEvent` (type, and a `RawExtension` holding the object's envelope).
fn events(mut body: &[u8]) -> Result<Vec<(String, serde_json::Value)>> {
    let mut events = Vec::new();
    while body.len() >= 4 {
        let length = u32::from_be_bytes(body[..4].try_into()?) as usize;
        let frame = body.get(4..4 + length).context("a frame cut short")?;
        body = &body[4 + length..];
        let (mut kind, mut object) = (String::new(), serde_json::Value::Null);
        for (number, bytes) in fields(frame)? {
            match number {
                1 => kind = String::from_utf8(bytes.to_vec())?,
                2 => {
                    let raw = fields(bytes)?.into_iter().find(|(n, _)| *n == 1);
                    let raw = raw.context("a RawExtension without raw")?.1;
                    object = protobuf_object_json(raw)?;
                }
                _ => {}
            }
        }
        events.push((kind, object));
    }
    ensure!(body.is_empty(), "bytes after the last frame");
    Ok(events)
}

/// The length-delimited fields of a message (the only kind a `WatchEvent` holds).
fn fields(mut message: &[u8]) -> Result<Vec<(u64, &[u8])>> {
    let mut fields = Vec::new();
    while !message.is_empty() {
        let key = varint(&mut message)?;
        ensure!(key & 7 == 2, "a field that is not length-delimited");
        let length = usize::try_from(varint(&mut message)?)?;
        let value = message.get(..length).context("a field cut short")?;
        message = &message[length..];
        fields.push((key >> 3, value));
    }
    Ok(fields)
}

fn varint(bytes: &mut &[u8]) -> Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first().context("a varint cut short")?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    anyhow::bail!("a varint too long")
}
