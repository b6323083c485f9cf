//! The node's own pods made and removed while the cloud is away: kubelet's create of a pod
//! bound to this node (a static pod's mirror pod) and its final delete of one (grace period
//! 0, once the pod's containers are gone), applied to every component's cached sets that
//! hold such a pod, sent to their offline watches as `ADDED` and `DELETED`, and answered as
//! kube-apiserver answers them. Each is a local write ([`super::layer`]): a watch resumed
//! after the reconnect from its version is told to list again, and the cloud's list wins.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use serde_json::{Value, json};

use super::Local;
use super::endpoints::PodEndpoint;
use super::error::LocalError;
use super::layer::{Copy, version};
use super::media::{is_protobuf, whole};
use super::own::Own;
use super::patch::PatchError;
use super::refilter::Filtered;
use crate::cache::{LocalChange, WriteOp};
use crate::reply::{ResponseBody, json};
use crate::request::{RequestContext, RequestInfo};
use crate::stream::{Event, EventType, protobuf_object_json};

/// The letters kube-apiserver appends to a `generateName` (no vowels, no look-alikes).
const NAME_LETTERS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Whether `info` is a create of pods in a namespace, or a delete of one pod.
fn pods(info: &RequestInfo) -> bool {
    info.api_group.is_empty()
        && info.api_version == "v1"
        && info.resource == "pods"
        && info.subresource.is_empty()
        && !info.namespace.is_empty()
}

/// A request's body, whole, and whether it is in Kubernetes' protobuf.
async fn body_of<B>(request: Request<B>) -> Result<(http::request::Parts, Bytes, bool), LocalError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<crate::error::BoxError>,
{
    let (parts, body) = request.into_parts();
    let protobuf = is_protobuf(&parts.headers);
    let body = whole(body).await.ok_or(LocalError::TooLarge)?;
    Ok((parts, body, protobuf))
}

/// A body as a JSON object, from JSON or Kubernetes' protobuf; an empty one is `{}`.
fn object_of(body: &[u8], protobuf: bool) -> Result<Value, LocalError> {
    if body.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let object = if protobuf {
        protobuf_object_json(body).map_err(|error| {
            PatchError::Body(format!(
                "the protobuf object cannot be read offline: {error}"
            ))
        })?
    } else {
        serde_json::from_slice(body).map_err(|error| PatchError::Body(error.to_string()))?
    };
    if !object.is_object() {
        return Err(LocalError::NotAnObject("JSON"));
    }
    Ok(object)
}

impl Local {
    /// Answers kubelet's create of a pod bound to this node from the local layer; the
    /// request back when it is not one (it is echoed, as every offline create is).
    pub(super) async fn create_own<B>(
        &self,
        context: &RequestContext,
        request: Request<B>,
    ) -> Result<Result<Response<ResponseBody>, Request<B>>, LocalError>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<crate::error::BoxError>,
    {
        let info = &context.info;
        let Some(node) = self.node_name.as_deref() else {
            return Ok(Err(request));
        };
        if !pods(info) || !info.name.is_empty() {
            return Ok(Err(request));
        }
        let (parts, body, protobuf) = body_of(request).await?;
        let mut pod = object_of(&body, protobuf)?;
        if pod["spec"]["nodeName"].as_str() != Some(node) {
            // Not this node's: echoed as before, as it came.
            let request = Request::from_parts(parts, http_body_util::Full::new(body));
            return Ok(Ok(super::write::echo(request, StatusCode::CREATED).await?));
        }
        let name = new_name(&pod, &info.namespace)?;
        self.cache.caught_up().await;
        let components = self.components(context)?;
        let store = self.cache.store();
        for resource in &components {
            let key = resource.object_key(&info.namespace, &name);
            if store
                .get(&key)
                .map_err(|error| LocalError::store(&error))?
                .is_some()
            {
                return Err(LocalError::Conflict(format!(
                    "pods {name:?} already exists"
                )));
            }
        }
        let listed = self.cache.listed_version("", "pods");
        let resource_version = self.cache.next_local_version(listed).to_string();
        let meta = &mut pod["metadata"];
        meta["name"] = name.clone().into();
        meta["namespace"] = info.namespace.clone().into();
        meta["uid"] = uid().into();
        meta["resourceVersion"] = resource_version.clone().into();
        meta["creationTimestamp"] = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            .to_string()
            .into();
        if let Value::Object(meta) = meta {
            meta.remove("deletionTimestamp");
            meta.remove("generation");
        }
        pod["kind"] = "Pod".into();
        pod["apiVersion"] = "v1".into();
        pod["status"] = json!({"phase": "Pending"});
        let object = Bytes::from(pod.to_string());
        let (mut ops, mut changes) = (Vec::new(), Vec::new());
        for resource in components {
            // Each component's copy as its filters make it (one they leave out is not made).
            let Filtered::Shown(shown) = self.refiltered(&resource, object.clone()) else {
                continue;
            };
            let key = resource.object_key(&info.namespace, &name);
            for set in self.holding(&resource, &info.namespace, &shown)? {
                ops.push(WriteOp::Entered {
                    set: set.clone(),
                    key: key.clone(),
                    resource_version: resource_version.clone(),
                });
                ops.push(WriteOp::OwnWrite {
                    set,
                    resource_version: resource_version.clone(),
                });
            }
            ops.push(WriteOp::Upsert {
                key,
                object: shown.clone(),
                resource_version: resource_version.clone(),
            });
            changes.push(LocalChange {
                resource,
                namespace: info.namespace.clone(),
                event: Event {
                    kind: EventType::Added,
                    object: shown,
                },
            });
        }
        self.cache.write_local(ops, changes).await?;
        self.cache.metrics().local_writes.inc();
        tracing::debug!(namespace = %info.namespace, name, resource_version, "pod created locally");
        Ok(Ok(json(StatusCode::CREATED, object)))
    }

    /// Answers kubelet's final delete (grace period 0) of a pod bound to this node from
    /// the local layer; the request back when it is not one (it is refused, as every
    /// offline delete is).
    pub(super) async fn delete_own<B>(
        &self,
        context: &RequestContext,
        request: Request<B>,
    ) -> Result<Result<Response<ResponseBody>, Request<B>>, LocalError>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<crate::error::BoxError>,
    {
        let info = &context.info;
        let Some(node) = self.node_name.as_deref() else {
            return Ok(Err(request));
        };
        if !pods(info) || info.name.is_empty() {
            return Ok(Err(request));
        }
        self.cache.caught_up().await;
        let copies = self.copies(context)?;
        let Some(base) = copies.first() else {
            return Err(LocalError::NotCached(format!(
                "pods {:?} not found",
                info.name
            )));
        };
        if !Own::Pod.owns(&base.object, node) {
            return Ok(Err(request));
        }
        let (_, body, protobuf) = body_of(request).await?;
        let options = object_of(&body, protobuf)?;
        if options["gracePeriodSeconds"].as_i64() != Some(0) {
            return Err(LocalError::Delete);
        }
        let uid = &options["preconditions"]["uid"];
        if let Some(uid) = uid.as_str()
            && base.object["metadata"]["uid"].as_str() != Some(uid)
        {
            return Err(LocalError::Conflict(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                base.object["metadata"]["uid"].as_str().unwrap_or_default()
            )));
        }
        let shown = copies.iter().map(|copy| version(&copy.object)).max();
        let listed = self.cache.listed_version("", "pods");
        let resource_version = self
            .cache
            .next_local_version(shown.unwrap_or(0).max(listed))
            .to_string();
        let mut gone = base.object.clone();
        gone["metadata"]["resourceVersion"] = resource_version.clone().into();
        if gone["metadata"]["deletionTimestamp"].is_null() {
            gone["metadata"]["deletionTimestamp"] =
                humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                    .to_string()
                    .into();
            gone["metadata"]["deletionGracePeriodSeconds"] = 0.into();
        }
        let object = Bytes::from(gone.to_string());
        let (mut ops, mut changes) = (Vec::new(), Vec::new());
        for Copy { resource, key, .. } in copies {
            for set in self.holding(&resource, &info.namespace, &object)? {
                ops.push(WriteOp::OwnWrite {
                    set: set.clone(),
                    resource_version: resource_version.clone(),
                });
                ops.push(WriteOp::Remove {
                    set,
                    key: key.clone(),
                    object: object.clone(),
                    resource_version: resource_version.clone(),
                });
            }
            changes.push(LocalChange {
                resource,
                namespace: info.namespace.clone(),
                event: Event {
                    kind: EventType::Deleted,
                    object: object.clone(),
                },
            });
        }
        self.follow(&PodEndpoint::of(&gone), &mut ops, &mut changes)?;
        self.cache.write_local(ops, changes).await?;
        self.cache.metrics().local_writes.inc();
        tracing::debug!(namespace = %info.namespace, name = %info.name, resource_version, "pod deleted locally");
        Ok(Ok(json(StatusCode::OK, object)))
    }
}

/// The name a created pod takes: its own, or its `generateName` and five letters.
fn new_name(pod: &Value, namespace: &str) -> Result<String, LocalError> {
    if let Some(named) = pod["metadata"]["namespace"].as_str()
        && !named.is_empty()
        && named != namespace
    {
        return Err(LocalError::Invalid(format!(
            "the namespace of the provided object ({named}) does not match the namespace sent on the request ({namespace})"
        )));
    }
    match (
        pod["metadata"]["name"].as_str().filter(|n| !n.is_empty()),
        pod["metadata"]["generateName"]
            .as_str()
            .filter(|n| !n.is_empty()),
    ) {
        (Some(name), _) => Ok(name.to_owned()),
        (None, Some(prefix)) => {
            let suffix: String = (0..5)
                .map(|_| char::from(NAME_LETTERS[fastrand::usize(..NAME_LETTERS.len())]))
                .collect();
            Ok(format!("{prefix}{suffix}"))
        }
        (None, None) => Err(LocalError::Invalid(
            "metadata.name: Required value: name or generateName is required".into(),
        )),
    }
}

/// A random (version 4) UUID, as kube-apiserver gives every object it creates.
fn uid() -> String {
    let mut bytes: [u8; 16] = fastrand::u128(..).to_be_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}
