//! Clients that take objects' metadata alone (client-go's metadata client, a garbage
//! collector's informers): online, the gateway asks the apiserver for whole objects, filters
//! and caches them as for any client, and sends each as a `PartialObjectMetadata`; offline,
//! it answers so from the cache. What such a client reads is kube-apiserver's own answer to
//! the same request, filtered.

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::protobuf_clients::{direct, read_as, tagged_configmaps, through_gateway};
use crate::support::{Env, runtime, wait_readyz};

/// What client-go's metadata client sends for a list or watch.
const LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
/// What it sends for a get.
const GET: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
/// The same in JSON alone, as the apiserver is asked here to answer what the gateway answers
/// (it would choose protobuf, the client's first choice).
const LIST_JSON: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const GET_JSON: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
/// What the tagger filter (tag `t`) writes on each object it keeps.
const TRAIL: &str = "edgegate.test/trail";

/// Five ConfigMaps and one the tagger drops, read by a kube-rs client as client-go's
/// metadata client reads them. Through the gateway, its list is kube-apiserver's own
/// `PartialObjectMetadataList` for the same request without the dropped ConfigMap, each
/// item with the tagger's annotation; so are its get and a watch's event. With the link
/// cut, its list and get are answered from the cache the same.
pub fn metadata_clients_read_filtered_metadata_online_and_offline(env: &Env) -> Result<()> {
    let (relay, gateway, path) = tagged_configmaps(env, "metadata")?;
    let rt = runtime();
    let through = rt.block_on(async { through_gateway(&gateway.url()) })?;
    let direct = rt.block_on(direct(&env.cluster.admin_kubeconfig))?;
    let get = format!("{path}/p-1");

    let (expected, expected_one) = rt.block_on(async {
        let (status, _, own) = read_as(&direct, &path, LIST_JSON).await?;
        ensure!(status == 200, "the apiserver's own metadata list: {status}");
        let mut own: Value = serde_json::from_slice(&own)?;
        let items = own["items"].as_array_mut().context("its items")?;
        items.retain(|item| item["metadata"]["name"] != "p-drop");
        items
            .iter_mut()
            .for_each(|item| item["metadata"]["annotations"][TRAIL] = "t".into());
        let (_, _, one) = read_as(&direct, &get, GET_JSON).await?;
        let mut one: Value = serde_json::from_slice(&one)?;
        one["metadata"]["annotations"][TRAIL] = "t".into();
        Ok((own, one))
    })?;
    let version = expected["metadata"]["resourceVersion"].clone();

    rt.block_on(async {
        let (status, media, list) = read_as(&through, &path, LIST).await?;
        let list: Value = serde_json::from_slice(&list)?;
        ensure!(
            status == 200 && media.starts_with("application/json"),
            "the online list: {status} {media}"
        );
        ensure!(
            same_but_version(&list, &expected),
            "the online list is the apiserver's, filtered:\n{list}\nvs\n{expected}"
        );
        let (status, _, one) = read_as(&through, &get, GET).await?;
        let one: Value = serde_json::from_slice(&one)?;
        ensure!(
            status == 200 && one == expected_one,
            "the online get: {status}\n{one}\nvs\n{expected_one}"
        );
        let (status, _, _) = read_as(&through, &format!("{path}/p-drop"), GET).await?;
        ensure!(status == 404, "the get of the dropped ConfigMap: {status}");

        let version = version.as_str().context("the list's version")?;
        let watch = format!("{path}?watch=true&resourceVersion={version}&timeoutSeconds=3");
        // Made after the list: a watch from the list's version is sent it, whenever it opens.
        let ns = path.split('/').nth(4).context("the namespace")?;
        env.cluster
            .kubectl(&["create", "configmap", "p-6", "-n", ns])?;
        let (status, _, events) = read_as(&through, &watch, LIST).await?;
        ensure!(status == 200, "the online watch: {status}");
        let events: Vec<Value> = serde_json::Deserializer::from_slice(&events)
            .into_iter()
            .collect::<Result<_, _>>()?;
        ensure!(
            events.iter().any(|event| event["type"] == "ADDED"
                && event["object"]["kind"] == "PartialObjectMetadata"
                && event["object"]["metadata"]["name"] == "p-6"
                && event["object"]["metadata"]["annotations"][TRAIL] == "t"
                && event["object"].get("data").is_none()),
            "the online watch sends p-6's metadata, filtered: {events:?}"
        );
        Ok(())
    })?;
    crate::support::wait_sets(gateway.hub, "test", 1)?;

    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;
    rt.block_on(async {
        let (status, _, list) = read_as(&through, &path, LIST).await?;
        let list: Value = serde_json::from_slice(&list)?;
        let names: Vec<&Value> = list["items"]
            .as_array()
            .context("the offline list's items")?
            .iter()
            .map(|item| &item["metadata"]["name"])
            .collect();
        ensure!(
            status == 200
                && list["kind"] == "PartialObjectMetadataList"
                && names.len() == 6
                && list["items"]
                    .as_array()
                    .is_some_and(|items| items.iter().all(|i| i.get("data").is_none())),
            "the offline list: {status} {names:?}"
        );
        let (status, _, one) = read_as(&through, &get, GET).await?;
        let one: Value = serde_json::from_slice(&one)?;
        ensure!(
            status == 200 && one == expected_one,
            "the offline get: {status}\n{one}\nvs\n{expected_one}"
        );
        Ok(())
    })
}

/// Whether two lists are the same but for their own `resourceVersion` (the gateway's list
/// was read after the apiserver's).
fn same_but_version(a: &Value, b: &Value) -> bool {
    let without = |list: &Value| {
        let mut list = list.clone();
        list["metadata"]
            .as_object_mut()
            .map(|metadata| metadata.remove("resourceVersion"));
        list
    };
    without(a) == without(b)
}
