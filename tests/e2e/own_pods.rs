//! The node's own pods made and removed while the cloud is away: kubelet's create of a
//! mirror pod (in protobuf, as kubelet writes) and its final delete of a pod (grace period 0,
//! its `DeleteOptions` in protobuf) are answered as kube-apiserver answers them, read back,
//! watched, kept across a restart, and give way to the cloud's pods after the reconnect.

use std::time::Duration;

use anyhow::{Result, ensure};

use crate::own_node::OwnNode;
use crate::own_writes::{KUBELET, pb_appended, pb_field, read, rv, write};
use crate::support::{
    Env, Watch, client, create_configmaps, get_as, list_as, runtime, wait_readyz, wait_sets,
};

/// Offline, kubelet creates a mirror pod and deletes a pod of its node: a GET, kubelet's
/// list and its watch show both, a restart keeps them, a pod of another node is echoed and
/// not kept, a wrong uid is a conflict and a graceful delete is refused. After the
/// reconnect, kubelet's watch resumed from its writes is told to list again, and the list
/// is the cloud's.
pub fn offline_mirror_pod_creates_and_final_deletes(env: &Env) -> Result<()> {
    let OwnNode {
        node,
        ns,
        relay,
        mut gateway,
    } = OwnNode::start(env, "pods", &[])?.with_web_pod(env)?;
    let rt = runtime();
    let client = client();
    let base = gateway.url();
    let pods_url = format!("{base}/api/v1/namespaces/{ns}/pods");
    // As kubelet lists and watches its pods: every namespace, by its node's name.
    let kubelet_pods = format!("{base}/api/v1/pods?fieldSelector=spec.nodeName%3D{node}");
    let web = rt.block_on(read(&client, &format!("{pods_url}/web")))?;
    let (status, web_protobuf) = rt.block_on(crate::support::get_accepting(
        &client,
        &format!("{pods_url}/web"),
        KUBELET,
        "application/vnd.kubernetes.protobuf",
    ))?;
    ensure!(status == 200, "the pod in protobuf: {status}");
    let (list_rv, listed) = rt.block_on(list_as(&client, &kubelet_pods, KUBELET))?;
    ensure!(listed.len() == 1, "kubelet lists its pod: {listed:?}");
    wait_sets(gateway.hub, "kubelet", 1)?;
    // Later writes in the cloud leave room for local versions above the list's.
    rt.block_on(create_configmaps(&client, &base, &ns, "later", 8))?;
    let (_, configmaps) = rt.block_on(list_as(
        &client,
        &format!("{base}/api/v1/namespaces/{ns}/configmaps"),
        KUBELET,
    ))?;
    ensure!(configmaps.len() >= 8, "the configmaps are listed");

    relay.cut();
    wait_readyz(&gateway, 503, "the gateway to notice the cut")?;
    let mut watch = rt.block_on(Watch::open(
        &client,
        &format!("{kubelet_pods}&watch=true&resourceVersion={list_rv}"),
        KUBELET,
    ))?;

    // A mirror pod, as kubelet makes one of a static pod: the pod's protobuf with a name
    // and the mirror annotation of its own, its uid and version cleared.
    let metadata = [
        pb_field(1, b"web-mirror"),
        pb_field(3, b""),
        pb_field(6, b""),
        pb_field(
            12,
            &[
                pb_field(1, b"kubernetes.io/config.mirror"),
                pb_field(2, b"4f1c"),
            ]
            .concat(),
        ),
    ]
    .concat();
    let mirror_body = pb_appended(&web_protobuf, &pb_field(1, &metadata))?;
    let create_mirror = || {
        rt.block_on(write(
            &client,
            http::Method::POST,
            &pods_url,
            "application/vnd.kubernetes.protobuf",
            &mirror_body,
        ))
    };
    let (status, mirror) = create_mirror()?;
    ensure!(status == 201, "the mirror pod's create: {status} {mirror}");
    ensure!(
        mirror["metadata"]["name"] == "web-mirror"
            && mirror["metadata"]["uid"]
                .as_str()
                .is_some_and(|u| u.len() == 36)
            && mirror["metadata"]["uid"] != web["metadata"]["uid"]
            && mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] == "4f1c"
            && mirror["spec"]["containers"][0]["image"] == "registry.invalid/web:1"
            && mirror["status"]["phase"] == "Pending"
            && rv(&mirror) > list_rv.parse::<u64>()?,
        "the create is answered with the pod it makes: {mirror}"
    );
    let added = rt.block_on(watch.wait_for("ADDED", "web-mirror", Duration::from_secs(20)))?;
    ensure!(
        added["object"] == mirror,
        "kubelet's offline watch gets the mirror pod: {added}"
    );
    let read_back = rt.block_on(read(&client, &format!("{pods_url}/web-mirror")))?;
    ensure!(
        read_back == mirror,
        "a GET shows the mirror pod: {read_back}"
    );
    let (status, again) = create_mirror()?;
    ensure!(status == 409, "a second create conflicts: {status} {again}");

    // A pod of another node is echoed, as every other offline create is, and not kept.
    let (status, echoed) = rt.block_on(write(
        &client,
        http::Method::POST,
        &pods_url,
        "application/json",
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"elsewhere"},"spec":{"nodeName":"another-node","containers":[{"name":"c","image":"registry.invalid/c:1"}]}}"#,
    ))?;
    ensure!(
        status == 201 && echoed["metadata"]["name"] == "elsewhere",
        "another node's pod is echoed: {status} {echoed}"
    );
    let (status, _) = rt.block_on(get_as(&client, &format!("{pods_url}/elsewhere"), KUBELET))?;
    ensure!(status == 404, "another node's pod is not kept: {status}");

    // kubelet's final delete: grace period 0 and its uid as the precondition, in protobuf.
    let delete_options = |uid: &str, grace: u8| {
        let options = [
            vec![1 << 3, grace],
            pb_field(2, &pb_field(1, uid.as_bytes())),
        ]
        .concat();
        let type_meta = [pb_field(1, b"v1"), pb_field(2, b"DeleteOptions")].concat();
        [
            b"k8s\0".to_vec(),
            pb_field(1, &type_meta),
            pb_field(2, &options),
            pb_field(3, b""),
            pb_field(4, b""),
        ]
        .concat()
    };
    let uid = web["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let delete = |body: Vec<u8>| {
        rt.block_on(write(
            &client,
            http::Method::DELETE,
            &format!("{pods_url}/web"),
            "application/vnd.kubernetes.protobuf",
            body,
        ))
    };
    let (status, refused) = delete(delete_options("not-its-uid", 0))?;
    ensure!(status == 409, "a wrong uid conflicts: {status} {refused}");
    let (status, refused) = delete(delete_options(&uid, 30))?;
    ensure!(
        status == 403,
        "a graceful delete waits for the cloud: {status} {refused}"
    );
    let (status, deleted) = delete(delete_options(&uid, 0))?;
    ensure!(
        status == 200
            && deleted["metadata"]["name"] == "web"
            && !deleted["metadata"]["deletionTimestamp"].is_null()
            && rv(&deleted) > rv(&mirror),
        "the final delete is answered with the pod: {status} {deleted}"
    );
    let gone = rt.block_on(watch.wait_for("DELETED", "web", Duration::from_secs(20)))?;
    ensure!(
        rv(&gone["object"]) == rv(&deleted),
        "kubelet's offline watch gets the delete: {gone}"
    );
    let (status, _) = rt.block_on(get_as(&client, &format!("{pods_url}/web"), KUBELET))?;
    ensure!(status == 404, "the deleted pod is gone: {status}");
    let names = |pods: &[serde_json::Value]| -> Vec<String> {
        pods.iter()
            .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
            .collect()
    };
    let (_, offline) = rt.block_on(list_as(&client, &kubelet_pods, KUBELET))?;
    ensure!(
        names(&offline) == ["web-mirror"],
        "kubelet's list offline: {:?}",
        names(&offline)
    );
    drop(watch);

    gateway.stop(Duration::from_secs(5));
    gateway.restart()?;
    let (_, restarted) = rt.block_on(list_as(&client, &kubelet_pods, KUBELET))?;
    ensure!(
        names(&restarted) == ["web-mirror"],
        "a restart keeps both: {:?}",
        names(&restarted)
    );

    relay.restore();
    wait_readyz(&gateway, 200, "the gateway to reconnect")?;
    let mut resumed = rt.block_on(Watch::open(
        &client,
        &format!("{kubelet_pods}&watch=true&resourceVersion={}", rv(&deleted)),
        KUBELET,
    ))?;
    let expired = rt.block_on(resumed.next(Duration::from_secs(20)))?;
    ensure!(
        expired
            .as_ref()
            .is_some_and(|e| e["type"] == "ERROR" && e["object"]["code"] == 410),
        "kubelet's resumed watch is told to list again: {expired:?}"
    );
    let (_, cloud) = rt.block_on(list_as(&client, &kubelet_pods, KUBELET))?;
    ensure!(
        names(&cloud) == ["web"],
        "after the reconnect the list is the cloud's: {:?}",
        names(&cloud)
    );
    Ok(())
}
