//! Clients that take Kubernetes' protobuf and not JSON, answered offline in protobuf: what
//! they read of the cache is what kube-apiserver's own protobuf of the same objects reads as.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use edgegate::stream::protobuf_object_json;

use crate::support::{
    Plain, client, create_configmaps, get_accepting, get_as, namespace, relayed_gateway, runtime,
    wait_readyz,
};

const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Five ConfigMaps, listed as kubelet in JSON (so their set is cached) and, by the same
/// component, in protobuf from kube-apiserver itself. With the link cut, a protobuf-only
/// client's list, get and watch are answered in protobuf, and read as the apiserver's own;
/// a client that takes neither JSON nor protobuf is `406`, and kubectl's table request
/// (plain JSON its fallback) gets JSON.
pub fn protobuf_only_clients_are_answered_offline_in_protobuf(
    env: &crate::support::Env,
) -> Result<()> {
    let (relay, gateway) = relayed_gateway(env)?;
    let ns = namespace(&env.cluster, "protobuf")?;
    let rt = runtime();
    let client = client();
    rt.block_on(create_configmaps(&client, &gateway.url(), &ns, "p", 5))?;
    let url = format!("{}/api/v1/namespaces/{ns}/configmaps", gateway.url());
    let (status, _) = rt.block_on(get_as(&client, &url, KUBELET))?;
    ensure!(status == 200, "the JSON list: {status}");
    crate::support::wait_sets(gateway.hub, "kubelet", 1)?;
    let (status, online) = rt.block_on(get_accepting(&client, &url, KUBELET, PROTOBUF))?;
    ensure!(status == 200, "the apiserver's protobuf list: {status}");
    let online = items(&protobuf_object_json(&online)?);

    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;

    let (status, offline) = rt.block_on(answer(&client, &url))?;
    ensure!(status == 200, "the offline protobuf list: {status}");
    let list = protobuf_object_json(&offline).context("the offline list reads as protobuf")?;
    ensure!(list["kind"] == "ConfigMapList", "{}", list["kind"]);
    ensure!(
        items(&list) == online,
        "the offline list reads as the apiserver's:\n{:?}\nvs\n{online:?}",
        items(&list)
    );
    let paged = protobuf_object_json(&rt.block_on(answer(&client, &format!("{url}?limit=2")))?.1)?;
    ensure!(
        paged["metadata"]["remainingItemCount"] == 3 && paged["metadata"]["continue"].is_string(),
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
        added == 5 && events.last().is_some_and(|(kind, _)| kind == "BOOKMARK"),
        "every ConfigMap as ADDED, then a bookmark: {:?}",
        events.iter().map(|(kind, _)| kind).collect::<Vec<_>>()
    );

    let table_only = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let (status, _) = rt.block_on(get_accepting(&client, &url, KUBELET, table_only))?;
    ensure!(status == 406, "a table-only client offline: {status}");
    let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let (status, body) = rt.block_on(get_accepting(&client, &url, KUBELET, kubectl))?;
    let list: serde_json::Value = serde_json::from_slice(&body)?;
    ensure!(
        status == 200 && list["items"].as_array().is_some_and(|i| i.len() == 5),
        "kubectl's table request falls back to JSON: {status}"
    );
    Ok(())
}

/// A request accepting protobuf only, as kubelet; the status and the whole body (a watch
/// ends by its `timeoutSeconds`).
async fn answer(client: &Plain, url: &str) -> Result<(http::StatusCode, Bytes)> {
    tokio::time::timeout(
        Duration::from_secs(30),
        get_accepting(client, url, KUBELET, PROTOBUF),
    )
    .await
    .context("no answer in time")?
}

/// A list's items as a Go client decodes them: zero members (which Go's protobuf encoder
/// writes and its JSON encoder leaves out) left out.
fn items(list: &serde_json::Value) -> Vec<serde_json::Value> {
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
