//! The local layer: the node's own writes while the cloud is away (updates and patches of
//! its Node and its pods, and of their status), applied to the cached objects as
//! kube-apiserver would apply them, stored durably in every component's copy, sent to the
//! offline watches, and answered with the object that results.
//!
//! # Resource versions
//! A local write takes a version one past the object's, past every set of its resource that
//! is cached (so a watch resumed from a list's version sends it, the multiplexer's shared
//! state takes it) and past every version given locally before ([`Cache::next_local_version`]),
//! but never past the highest version the cloud was seen at (the heartbeat's lease renewals,
//! the cached sets): whatever the cloud sends later is newer, so the cloud's next version of
//! the object replaces it in the cache and no client sees a version go back. With no room
//! left the write keeps the highest of those versions.
//!
//! [`Cache::next_local_version`]: crate::cache::Cache::next_local_version

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use serde_json::Value;

use super::Local;
use super::endpoints::{Followed, PodEndpoint, followers};
use super::error::LocalError;
use super::media::{PROTOBUF, content_type, media_type, whole};
use super::own::{Own, written};
use super::patch::{Change, PatchError};
use super::refilter::Filtered;
use crate::cache::{LocalChange, ResourceKey, Selectors, SetKey, WriteOp};
use crate::reply::{ResponseBody, json};
use crate::request::{RequestContext, Verb};
use crate::stream::{Event, EventType, protobuf_object_json};

/// One component's copy a local write changes: where it is, and what it was.
struct CopyChange<'a> {
    resource: &'a ResourceKey,
    key: &'a str,
    namespace: &'a str,
    /// The copy before the write.
    before: &'a Value,
    /// The write's version.
    resource_version: &'a str,
}

/// One component's cached copy of the object written.
pub(super) struct Copy {
    /// The resource, for that component.
    pub resource: ResourceKey,
    /// The object's key in the store.
    pub key: String,
    /// The object as that component's copy holds it.
    pub object: Value,
}

impl Local {
    /// Answers a write of the node's own objects from the local layer; `Ok(None)` when the
    /// write is not one (it is answered as before).
    pub(super) async fn write_own<B>(
        &self,
        context: &RequestContext,
        request: Request<B>,
    ) -> Result<Result<Response<ResponseBody>, Request<B>>, LocalError>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<crate::error::BoxError>,
    {
        let info = &context.info;
        let (Some(node), Some(verb)) = (self.node_name.as_deref(), info.verb.api()) else {
            return Ok(Err(request));
        };
        let Some(own) = Own::of(info, node) else {
            return Ok(Err(request));
        };
        let content_type = content_type(request.headers()).to_owned();
        let media = media_type(&content_type);
        let change = match verb {
            Verb::Patch => Change::of_patch(&content_type).map_err(LocalError::Patch)?,
            Verb::Update if media == "application/json" || media == PROTOBUF => Change::Replace,
            _ => return Ok(Err(request)),
        };
        if change == Change::Apply {
            return Err(LocalError::Unanswerable(
                "a server-side apply (application/apply-patch+yaml) needs it".to_owned(),
            ));
        }
        self.cache.caught_up().await;
        let mut copies = self.copies(context)?;
        let Some(base) = copies
            .iter()
            .find(|copy| copy.resource.component == context.cache_component)
            .or_else(|| copies.first())
        else {
            return Err(LocalError::NotCached(format!(
                "{} {:?} is not in the local cache",
                info.resource, info.name
            )));
        };
        if !own.owns(&base.object, node) {
            return Ok(Err(request));
        }
        let body = whole(request.into_body())
            .await
            .ok_or(LocalError::TooLarge)?;
        let body = if media == PROTOBUF {
            let object = protobuf_object_json(&body).map_err(|error| {
                LocalError::Patch(PatchError::Body(format!(
                    "the protobuf object cannot be read offline: {error}"
                )))
            })?;
            Bytes::from(object.to_string())
        } else {
            body
        };
        let shown = copies
            .iter()
            .map(|copy| version(&copy.object))
            .max()
            .unwrap_or(0);
        let listed = self.cache.listed_version(&info.api_group, &info.resource);
        let resource_version = self.cache.next_local_version(shown.max(listed)).to_string();
        let status = info.subresource == "status";
        let requester = base.resource.component.clone();
        let (mut answer, mut pod) = (None, None);
        let (mut ops, mut changes) = (Vec::new(), Vec::new());
        for copy in &mut copies {
            let mut after = copy.object.clone();
            change.apply(&mut after, &body).map_err(LocalError::Patch)?;
            preconditions(&copy.object, &after, change, &info.name)?;
            let mut result = written(own, status, &copy.object, after);
            result["metadata"]["resourceVersion"] = resource_version.clone().into();
            let bytes = Bytes::from(result.to_string());
            let change = CopyChange {
                resource: &copy.resource,
                key: &copy.key,
                namespace: &info.namespace,
                before: &copy.object,
                resource_version: &resource_version,
            };
            self.store_copy(&change, bytes.clone(), &mut ops, &mut changes)?;
            if copy.resource.component == requester {
                self.mark_own_write(
                    &copy.resource,
                    &info.namespace,
                    &bytes,
                    &resource_version,
                    &mut ops,
                )?;
                answer = Some(bytes);
                if own == Own::Pod {
                    pod = Some(PodEndpoint::of(&result));
                }
            }
        }
        if let Some(pod) = pod {
            self.follow(&pod, &mut ops, &mut changes)?;
        }
        self.cache.write_local(ops, changes).await?;
        self.cache.metrics().local_writes.inc();
        tracing::debug!(resource = %info.resource, name = %info.name, resource_version, "written locally");
        Ok(Ok(json(StatusCode::OK, answer.unwrap_or_default())))
    }

    /// Notes the write in every set of the writer's `resource` that holds `object`: once
    /// the cloud is back, a watch of such a set from the write's version on is answered
    /// `410 Expired`, so the writer lists the cloud's object again and, finding its write
    /// missing, makes it again (kubelet reconciles its pods' statuses so). Endpoints that
    /// follow are not noted: the cloud corrects them itself once it has the pod.
    fn mark_own_write(
        &self,
        resource: &ResourceKey,
        namespace: &str,
        object: &Bytes,
        resource_version: &str,
        ops: &mut Vec<WriteOp>,
    ) -> Result<(), LocalError> {
        for set in self.holding(resource, namespace, object)? {
            ops.push(WriteOp::OwnWrite {
                set,
                resource_version: resource_version.to_owned(),
            });
        }
        Ok(())
    }

    /// The sets of `resource` (one component's) that hold `object` in `namespace`.
    pub(super) fn holding(
        &self,
        resource: &ResourceKey,
        namespace: &str,
        object: &Bytes,
    ) -> Result<Vec<SetKey>, LocalError> {
        let sets = self
            .cache
            .store()
            .sets(&SetKey::resource_prefix(resource))
            .map_err(|error| LocalError::store(&error))?;
        Ok(sets
            .into_iter()
            .map(|(set, _)| set)
            .filter(|set| {
                (set.namespace.is_empty() || set.namespace == namespace)
                    && Selectors::new(&set.label_selector, &set.field_selector)
                        .is_ok_and(|selectors| selectors.matches(object))
            })
            .collect())
    }

    /// Has every cached endpoint that names `pod` follow it: written with the pod's write,
    /// at a version one past its own (never past the cloud's).
    pub(super) fn follow(
        &self,
        pod: &PodEndpoint,
        ops: &mut Vec<WriteOp>,
        changes: &mut Vec<LocalChange>,
    ) -> Result<(), LocalError> {
        let followers = followers(self.cache.store().as_ref(), pod)
            .map_err(|error| LocalError::store(&error))?;
        for Followed {
            resource,
            key,
            before,
            mut after,
        } in followers
        {
            let listed = self
                .cache
                .listed_version(&resource.group, &resource.resource);
            let floor = version(&before).max(listed);
            let resource_version = self.cache.next_local_version(floor).to_string();
            after["metadata"]["resourceVersion"] = resource_version.clone().into();
            let change = CopyChange {
                resource: &resource,
                key: &key,
                namespace: &pod.namespace,
                before: &before,
                resource_version: &resource_version,
            };
            self.store_copy(&change, Bytes::from(after.to_string()), ops, changes)?;
        }
        Ok(())
    }

    /// Stores `changed`, the new state of one component's copy, as that component's
    /// filters make it (as they make a cloud event): upserted and sent as `MODIFIED`; left
    /// out by a filter, removed from the sets that hold it and sent as `DELETED` with its
    /// last state; a failed filter leaves the copy as it was.
    fn store_copy(
        &self,
        change: &CopyChange<'_>,
        changed: Bytes,
        ops: &mut Vec<WriteOp>,
        changes: &mut Vec<LocalChange>,
    ) -> Result<(), LocalError> {
        let resource_version = change.resource_version.to_owned();
        let event = match self.refiltered(change.resource, changed.clone()) {
            Filtered::Shown(object) => {
                ops.push(WriteOp::Upsert {
                    key: change.key.to_owned(),
                    object: object.clone(),
                    resource_version,
                });
                Event {
                    kind: EventType::Modified,
                    object,
                }
            }
            Filtered::Dropped => {
                let mut last = change.before.clone();
                last["metadata"]["resourceVersion"] = resource_version.clone().into();
                let last = Bytes::from(last.to_string());
                for set in self.holding(change.resource, change.namespace, &last)? {
                    ops.push(WriteOp::Remove {
                        set,
                        key: change.key.to_owned(),
                        object: last.clone(),
                        resource_version: resource_version.clone(),
                    });
                }
                Event {
                    kind: EventType::Deleted,
                    object: last,
                }
            }
            Filtered::Failed => return Ok(()),
        };
        changes.push(LocalChange {
            resource: change.resource.clone(),
            namespace: change.namespace.to_owned(),
            event,
        });
        Ok(())
    }

    /// The resource `context` writes, for every component the cache knows and its own.
    pub(super) fn components(
        &self,
        context: &RequestContext,
    ) -> Result<Vec<ResourceKey>, LocalError> {
        let mut components: Vec<String> = self
            .cache
            .store()
            .components()
            .map_err(|error| LocalError::store(&error))?
            .into_iter()
            .map(|(component, _)| component)
            .collect();
        if !components.contains(&context.cache_component) {
            components.push(context.cache_component.clone());
        }
        Ok(components
            .into_iter()
            .map(|component| ResourceKey {
                component,
                ..super::resource_of(context)
            })
            .collect())
    }

    /// Every component's cached copy of the object `context` writes.
    pub(super) fn copies(&self, context: &RequestContext) -> Result<Vec<Copy>, LocalError> {
        let store = self.cache.store();
        let mut copies = Vec::new();
        for resource in self.components(context)? {
            let key = resource.object_key(&context.info.namespace, &context.info.name);
            let Some(bytes) = store.get(&key).map_err(|error| LocalError::store(&error))? else {
                continue;
            };
            // What the cache cannot read back as an object is not a base to write on.
            let Ok(object @ Value::Object(_)) = serde_json::from_slice(&bytes) else {
                continue;
            };
            copies.push(Copy {
                resource,
                key,
                object,
            });
        }
        Ok(copies)
    }
}

/// What kube-apiserver checks before it writes: the object keeps its name, an update names
/// the version it was read at (when it names one), and a uid the write names is the
/// object's (kubelet's status patches carry it as their precondition).
fn preconditions(
    before: &Value,
    after: &Value,
    change: Change,
    name: &str,
) -> Result<(), LocalError> {
    let field = |object: &Value, field: &str| object["metadata"][field].as_str().map(str::to_owned);
    if let Some(named) = field(after, "name").filter(|named| named != name) {
        return Err(LocalError::Invalid(format!(
            "the name of the object ({named}) does not match the name on the URL ({name})"
        )));
    }
    if let Some(uid) = field(after, "uid")
        && field(before, "uid").is_some_and(|held| held != uid)
    {
        return Err(LocalError::Conflict(format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            field(before, "uid").unwrap_or_default()
        )));
    }
    if change == Change::Replace
        && let Some(read_at) = field(after, "resourceVersion").filter(|v| !v.is_empty())
        && Some(&read_at) != field(before, "resourceVersion").as_ref()
    {
        return Err(LocalError::Conflict(format!(
            "Operation cannot be fulfilled on {name:?}: the object has been modified; please apply your changes to the latest version and try again"
        )));
    }
    Ok(())
}

/// An object's resourceVersion as a number (0 when it has none the gateway can read).
pub(super) fn version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
