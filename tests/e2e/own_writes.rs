//! The node's own writes while the cloud is away: kubelet's patches and updates of its pods
//! and its Node are applied to the cache, read back, watched, kept across a restart, and
//! give way to the cloud's next version once the link is back.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use edgegate_testkit::ADMIN_TOKEN;
use http_body_util::{BodyExt, Full};

use crate::own_node::OwnNode;
use crate::support::{
    Env, Plain, Watch, client, create_configmaps, get_as, list_as, request, runtime, wait_readyz,
    wait_sets,
};

pub const KUBELET: &str = "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19";

/// Sends a write as kubelet with `content_type`; the status and the body as JSON.
pub async fn write(
    client: &Plain,
    method: http::Method,
    url: &str,
    content_type: &'static str,
    body: impl AsRef<[u8]>,
) -> Result<(http::StatusCode, serde_json::Value)> {
    let mut request = request(method, url, Some(ADMIN_TOKEN), KUBELET, None)?;
    *request.body_mut() = Full::new(Bytes::copy_from_slice(body.as_ref()))
        .map_err(|never| match never {})
        .boxed();
    request
        .headers_mut()
        .insert("content-type", http::HeaderValue::from_static(content_type));
    let response = client.request(request).await?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes();
    let value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{url}: {}", String::from_utf8_lossy(&bytes)))?;
    Ok((status, value))
}

/// GETs `url` as kubelet, as JSON.
pub async fn read(client: &Plain, url: &str) -> Result<serde_json::Value> {
    read_as(client, url, KUBELET).await
}

/// GETs `url` as `agent`, as JSON; fails unless it is answered `200`.
pub async fn read_as(client: &Plain, url: &str, agent: &str) -> Result<serde_json::Value> {
    let (status, body) =
        crate::support::get_accepting(client, url, agent, "application/json").await?;
    ensure!(
        status == 200,
        "{url}: {status} {}",
        String::from_utf8_lossy(&body)
    );
    Ok(serde_json::from_slice(&body)?)
}

/// An object's resourceVersion as a number (0 when it has none).
pub fn rv(object: &serde_json::Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Offline, kubelet's `PATCH pods/x/status` in each patch type (strategic merge, JSON merge,
/// JSON patch), a JSON `UPDATE` of the pod, a protobuf `UPDATE` of its status and a
/// strategic merge of its Node's status are
/// each answered with the object they make; a server-side apply is refused with a `Status`.
/// A GET and a list show the result, an offline watch gets it as MODIFIED, and the gateway
/// killed (SIGKILL) and started again still shows it; no version goes back. After the reconnect, kubelet's watch resumed from its write gets `410 Expired`, its
/// list is the cloud's (without the write) and its next watch the cloud's, where its write
/// made again replaces the local one at a newer version.
pub fn offline_status_patches_and_updates_are_read_back(env: &Env) -> Result<()> {
    let OwnNode {
        node,
        ns,
        relay,
        mut gateway,
    } = OwnNode::start(env, "own", &[])?.with_web_pod(env)?;
    let rt = runtime();
    let client = client();
    let base = gateway.url();
    let pod_url = format!("{base}/api/v1/namespaces/{ns}/pods/web");
    let pods_url = format!("{base}/api/v1/namespaces/{ns}/pods");
    let node_url = format!("{base}/api/v1/nodes/{node}");
    // Later writes in the cloud leave room for local versions above the pod's.
    rt.block_on(create_configmaps(&client, &base, &ns, "later", 8))?;
    let (_, configmaps) = rt.block_on(list_as(
        &client,
        &format!("{base}/api/v1/namespaces/{ns}/configmaps"),
        KUBELET,
    ))?;
    ensure!(configmaps.len() >= 8, "the configmaps are listed");
    let online = rt.block_on(read(&client, &pod_url))?;
    // The pod as kube-apiserver encodes it in protobuf, as kubelet reads it.
    let (status, online_protobuf) = rt.block_on(crate::support::get_accepting(
        &client,
        &pod_url,
        KUBELET,
        "application/vnd.kubernetes.protobuf",
    ))?;
    ensure!(
        status == 200 && online_protobuf.starts_with(b"k8s\0"),
        "the pod in protobuf: {status}"
    );
    // Read by Kubernetes' schema, it is the pod kube-apiserver writes in JSON (Go's encoder
    // writes the zeros of fields JSON leaves out).
    let described = edgegate::stream::protobuf_object_json(&online_protobuf)?;
    ensure!(
        without_zeros(described.clone()) == without_zeros(online.clone()),
        "the pod read from protobuf:\n{described}\nvs its JSON\n{online}"
    );
    rt.block_on(read(&client, &node_url))?;
    // As kubelet's reflector first lists: from the cloud's watch cache, at its version.
    let (list_rv, _) = rt.block_on(list_as(
        &client,
        &format!("{pods_url}?resourceVersion=0"),
        KUBELET,
    ))?;
    wait_sets(gateway.hub, "kubelet", 2)?;
    let uid = online["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // kubelet's watch, fed from the cloud: it must not stall once the cloud is gone
    // (YurtHub #2792), but end, so that kubelet watches again, from the cache.
    let mut fed = rt.block_on(Watch::open(
        &client,
        &format!("{pods_url}?watch=true&resourceVersion={list_rv}"),
        KUBELET,
    ))?;

    // The link goes down as a real one does: nothing resets the watch's connection.
    relay.stall();
    let cut = std::time::Instant::now();
    // A hang guard, not a bound on time: the health checks decide when the cloud is gone.
    let ended = rt.block_on(async {
        while fed.next(Duration::from_secs(120)).await?.is_some() {}
        anyhow::Ok(())
    });
    ended.context("kubelet's watch from the cloud did not end after the cut")?;
    let ended_after = cut.elapsed();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;
    let mut again = rt.block_on(Watch::open(
        &client,
        &format!("{pods_url}?watch=true&resourceVersion={list_rv}&allowWatchBookmarks=true"),
        KUBELET,
    ))?;
    let bookmark = rt.block_on(again.next(Duration::from_secs(20)))?;
    ensure!(
        bookmark.as_ref().is_some_and(|e| e["type"] == "BOOKMARK"),
        "the watch again from the cache starts with its bookmark: {bookmark:?}"
    );
    eprintln!(
        "after the cut, kubelet's watch from the cloud ended in {ended_after:?}; watched again, it was fed from the cache {:?} after the cut",
        cut.elapsed()
    );
    drop(again);
    let status_url = format!("{pod_url}/status");
    let patches: [(&'static str, String); 3] = [
        (
            "application/strategic-merge-patch+json",
            format!(
                r#"{{"metadata":{{"uid":"{uid}"}},"status":{{"$setElementOrder/conditions":[{{"type":"Ready"}}],"conditions":[{{"type":"Ready","status":"True"}}],"podIP":"10.88.0.7","podIPs":[{{"ip":"10.88.0.7"}}],"phase":"Running"}}}}"#
            ),
        ),
        (
            "application/merge-patch+json",
            r#"{"status":{"message":"merged offline"}}"#.to_owned(),
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"add","path":"/status/reason","value":"Patched"}]"#.to_owned(),
        ),
    ];
    let mut last = rv(&online);
    for (content_type, body) in &patches {
        let (status, answer) = rt.block_on(write(
            &client,
            http::Method::PATCH,
            &status_url,
            content_type,
            body,
        ))?;
        ensure!(status == 200, "{content_type}: {status} {answer}");
        ensure!(
            rv(&answer) >= last,
            "{content_type}: the version went back: {answer}"
        );
        last = rv(&answer);
    }
    // A server-side apply needs the cloud's field management: a clear refusal, no change.
    let (status, refused) = rt.block_on(write(
        &client,
        http::Method::PATCH,
        &status_url,
        "application/apply-patch+yaml",
        "status:\n  message: applied offline\n",
    ))?;
    ensure!(
        status == 503
            && refused["kind"] == "Status"
            && refused["message"]
                .as_str()
                .is_some_and(|m| m.contains("apply")),
        "an offline apply patch: {status} {refused}"
    );
    let patched = rt.block_on(read(&client, &pod_url))?;
    ensure!(
        patched["status"]["message"] != "applied offline",
        "the refused apply changed the pod: {patched}"
    );
    let shows_patches = |pod: &serde_json::Value| {
        pod["status"]["podIP"] == "10.88.0.7"
            && pod["status"]["phase"] == "Running"
            && pod["status"]["conditions"][0]["status"] == "True"
            && pod["status"]["message"] == "merged offline"
            && pod["status"]["reason"] == "Patched"
    };
    ensure!(
        shows_patches(&patched),
        "a GET shows every patch: {patched}"
    );
    ensure!(
        rv(&patched) > rv(&online),
        "a written pod is newer: {patched}"
    );

    let (status, node_answer) = rt.block_on(write(
        &client,
        http::Method::PATCH,
        &format!("{node_url}/status"),
        "application/strategic-merge-patch+json",
        r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}"#,
    ))?;
    ensure!(
        status == 200,
        "the node's status patch: {status} {node_answer}"
    );
    let node_read = rt.block_on(read(&client, &node_url))?;
    let ready = node_read["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["reason"] == "KubeletReady");
    ensure!(
        ready,
        "a GET of the node shows its Ready condition: {node_read}"
    );

    let mut watch = rt.block_on(Watch::open(
        &client,
        &format!("{pods_url}?watch=true&resourceVersion={list_rv}"),
        KUBELET,
    ))?;
    let mut update = patched.clone();
    update["metadata"]["labels"] = serde_json::json!({"written": "offline"});
    let (status, updated) = rt.block_on(write(
        &client,
        http::Method::PUT,
        &pod_url,
        "application/json",
        &update.to_string(),
    ))?;
    ensure!(status == 200, "the update: {status} {updated}");
    ensure!(
        updated["metadata"]["labels"]["written"] == "offline" && shows_patches(&updated),
        "the update keeps the status and sets the label: {updated}"
    );
    // From the list's version the watch first replays the patches (the pod as they left
    // it), then gets the update.
    let mut event = serde_json::Value::Null;
    for _ in 0..2 {
        event = rt.block_on(watch.wait_for("MODIFIED", "web", Duration::from_secs(20)))?;
        if event["object"]["metadata"]["labels"]["written"] == "offline" {
            break;
        }
    }
    ensure!(
        event["object"]["metadata"]["labels"]["written"] == "offline",
        "the offline watch gets the update: {event}"
    );
    let (_, listed) = rt.block_on(list_as(&client, &pods_url, KUBELET))?;
    ensure!(
        listed.len() == 1 && listed[0]["metadata"]["labels"]["written"] == "offline",
        "a list shows the update: {listed:?}"
    );
    ensure!(
        rv(&listed[0]) == rv(&updated) && rv(&updated) >= last,
        "a list shows the update's version"
    );
    drop(watch);

    // An update of its status in protobuf: kube-apiserver's encoding of the pod, with a
    // later metadata and status after it on the wire (protobuf merges a message sent twice).
    let body = protobuf_update(
        &online_protobuf,
        &rv(&updated).to_string(),
        ("written", "protobuf"),
        "10.88.0.8",
    )?;
    let (status, updated) = rt.block_on(write(
        &client,
        http::Method::PUT,
        &status_url,
        "application/vnd.kubernetes.protobuf",
        &body,
    ))?;
    ensure!(status == 200, "the protobuf update: {status} {updated}");
    ensure!(
        updated["status"]["podIP"] == "10.88.0.8"
            && updated["metadata"]["labels"]["written"] == "protobuf"
            && updated["spec"]["containers"][0]["image"] == "registry.invalid/web:1"
            && rv(&updated) > rv(&listed[0]),
        "the protobuf update is answered with the pod it makes: {updated}"
    );
    let read_back = rt.block_on(read(&client, &pod_url))?;
    ensure!(
        read_back == updated,
        "a GET shows the protobuf update:\n{read_back}\nvs\n{updated}"
    );

    // A second power-off while still cut.
    gateway.kill();
    gateway.restart()?;
    let after_restart = rt.block_on(read(&client, &pod_url))?;
    ensure!(
        after_restart == updated,
        "a restart keeps the local write:\n{after_restart}\nvs\n{updated}"
    );
    let (_, body) = rt.block_on(get_as(&client, &node_url, KUBELET))?;
    ensure!(!body.is_empty(), "the node is still served");

    relay.restore();
    wait_readyz(&gateway, 200, "the gateway to reconnect")?;
    // kubelet's watch resumed from its own write lists again: the cloud never saw it.
    let mut resumed = rt.block_on(Watch::open(
        &client,
        &format!("{pods_url}?watch=true&resourceVersion={}", rv(&updated)),
        KUBELET,
    ))?;
    let expired = rt.block_on(resumed.next(Duration::from_secs(20)))?;
    ensure!(
        expired
            .as_ref()
            .is_some_and(|e| e["type"] == "ERROR" && e["object"]["code"] == 410),
        "kubelet's resumed watch is told to list again: {expired:?}"
    );
    ensure!(
        rt.block_on(resumed.next(Duration::from_secs(20)))?
            .is_none(),
        "and it ends"
    );
    // Its list is the cloud's, which lacks the write: kubelet re-sends it (below). The
    // list's commit clears the mark, so its next watch is the cloud's.
    // As kubelet's reflector lists again: from its last version, which is local, without a
    // limit (from the cloud's watch cache, which holds a list from a version it has not
    // reached: the gateway asks from the cloud's).
    let listing = std::time::Instant::now();
    let (relist_rv, relisted) = rt
        .block_on(list_as(
            &client,
            &format!("{pods_url}?resourceVersion={}", rv(&updated)),
            KUBELET,
        ))
        .with_context(|| gateway.log_tail(40))?;
    eprintln!(
        "after the reconnect, kubelet's list from its local version took {:?}",
        listing.elapsed()
    );
    ensure!(
        relisted.len() == 1 && relisted[0]["status"]["podIP"] != updated["status"]["podIP"],
        "the list after the reconnect is the cloud's: {relisted:?}"
    );
    let mut from_cloud = rt.block_on(Watch::open(
        &client,
        &format!("{pods_url}?watch=true&resourceVersion={relist_rv}"),
        KUBELET,
    ))?;
    // kubelet re-sends its status once the cloud answers: the cloud's version replaces ours.
    let (status, cloud) = rt.block_on(write(
        &client,
        http::Method::PATCH,
        &status_url,
        "application/strategic-merge-patch+json",
        r#"{"status":{"podIP":"10.88.0.9","podIPs":[{"ip":"10.88.0.9"}],"phase":"Running"}}"#,
    ))?;
    ensure!(status == 200, "the online patch: {status} {cloud}");
    ensure!(
        rv(&cloud) > rv(&updated),
        "the cloud's version ({}) is newer than the local one ({})",
        rv(&cloud),
        rv(&updated)
    );
    let event = rt.block_on(from_cloud.wait_for("MODIFIED", "web", Duration::from_secs(20)))?;
    ensure!(
        rv(&event["object"]) == rv(&cloud),
        "the watch after the relist is the cloud's: {event}"
    );
    let reread = rt.block_on(read(&client, &pod_url))?;
    ensure!(
        reread["status"]["podIP"] == "10.88.0.9" && rv(&reread) >= rv(&cloud),
        "after the reconnect the cloud's pod is read: {reread}"
    );
    let (_, relisted) = rt.block_on(list_as(&client, &pods_url, KUBELET))?;
    ensure!(
        relisted.len() == 1 && rv(&relisted[0]) >= rv(&cloud),
        "a list after the reconnect has the cloud's version"
    );
    Ok(())
}

/// A length-delimited protobuf field: its key, its length, its bytes.
pub fn pb_field(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![tag << 3 | 2];
    let mut len = value.len();
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    out.extend_from_slice(value);
    out
}

/// `object`, Kubernetes' protobuf of an object (`k8s\0` and a `runtime.Unknown`), with
/// `later` written after its own fields: a reader that merges as protobuf does sees the
/// object so changed.
pub fn pb_appended(object: &[u8], later: &[u8]) -> Result<Vec<u8>> {
    let envelope = object.strip_prefix(b"k8s\0").context("no magic")?;
    // The envelope's fields: typeMeta (1), raw (2), contentEncoding (3), contentType (4).
    let (mut rest, mut out) = (envelope, b"k8s\0".to_vec());
    while let Some((&key, after)) = rest.split_first() {
        let (mut len, mut shift, mut at) = (0usize, 0, 0);
        loop {
            let byte = *after.get(at).context("cut envelope")?;
            len |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            at += 1;
            if byte & 0x80 == 0 {
                break;
            }
        }
        ensure!(
            key & 7 == 2,
            "an envelope field that is not length-delimited"
        );
        let value = after.get(at..at + len).context("cut envelope field")?;
        let value = if key >> 3 == 2 {
            [value, later].concat()
        } else {
            value.to_vec()
        };
        out.extend(pb_field(key >> 3, &value));
        rest = &after[at + len..];
    }
    Ok(out)
}

/// `pod`'s protobuf with a metadata naming `resource_version` and adding `label`, and a
/// status naming `pod_ip`, after its own.
fn protobuf_update(
    pod: &[u8],
    resource_version: &str,
    label: (&str, &str),
    pod_ip: &str,
) -> Result<Vec<u8>> {
    let metadata = [
        pb_field(6, resource_version.as_bytes()),
        pb_field(
            11,
            &[
                pb_field(1, label.0.as_bytes()),
                pb_field(2, label.1.as_bytes()),
            ]
            .concat(),
        ),
    ]
    .concat();
    let later = [
        pb_field(1, &metadata),
        pb_field(3, &pb_field(6, pod_ip.as_bytes())),
    ]
    .concat();
    pb_appended(pod, &later)
}

/// `value` without its zeros (`""`, `0`, `false`, `null`, empty lists), at any depth: what
/// a Go client decodes the same whether they are written or not. Empty objects stay: Go
/// writes every struct, and `managedFields` are trees of them.
fn without_zeros(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    let zero = |v: &Value| match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(_) => false,
    };
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, without_zeros(v)))
                .filter(|(_, v)| !zero(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_zeros).collect()),
        other => other,
    }
}
