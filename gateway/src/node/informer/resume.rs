//! Where an informer starts after a restart: from what the cache persisted of its last list
//! and watch (component `edgegate`, all namespaces, no selectors), not from nothing.
//!
//! The persisted objects are handed on as the informer's first list, so lookups answer at
//! once (offline too, before any request has been made), and the informer watches from the
//! set's persisted resourceVersion: a restart costs the events since, not a full list
//! from resourceVersion 0 (which an apiserver may answer from a watch cache older than what
//! the gateway had seen). When that watch cannot be had (the version is too old: `410
//! Expired`, or any error), kube's watcher takes over and lists, as on a fresh node.

use std::time::Duration;

use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use kube::api::{Api, ApiResource, WatchEvent, WatchParams};
use kube::runtime::watcher;

use super::slim::SlimObject;
use crate::cache::{ResourceKey, Scope, Store};

/// The component the informers' requests are cached for (their `User-Agent`).
const COMPONENT: &str = "edgegate";

/// How long to wait before watching again after a watch that ended at once with nothing,
/// so that a gateway answering watches with a clean end does not make a busy loop.
const REWATCH_AFTER_EMPTY: Duration = Duration::from_secs(1);

/// What the cache holds of a kind: the resourceVersion its set is synced to and its objects.
pub(super) struct Persisted {
    resource_version: String,
    objects: Vec<SlimObject>,
}

/// The set the cache holds of what the gateway's own clients (component `edgegate`) listed
/// of `group/version/plural` across all namespaces without selectors, if one was committed:
/// what the informers and the multiplexer's feeds start from after a restart.
pub(crate) fn own_listing(
    store: &dyn Store,
    group: &str,
    version: &str,
    plural: &str,
) -> Option<crate::cache::Listing> {
    let key = ResourceKey {
        component: COMPONENT.to_owned(),
        resource: plural.to_owned(),
        version: version.to_owned(),
        group: group.to_owned(),
    };
    let everything = Scope {
        namespace: "",
        labels: "",
        fields: "",
    };
    crate::cache::list(store, &key, everything).ok()
}

/// The set the cache holds for `resource` as the informers list it, if one was committed
/// and reads back whole.
pub(super) fn persisted(store: &dyn Store, resource: &ApiResource) -> Option<Persisted> {
    let listing = own_listing(store, &resource.group, &resource.version, &resource.plural)?;
    let mut objects = Vec::new();
    for item in listing.items {
        // A set that does not read back whole is not a list to resume from.
        objects.push(serde_json::from_slice(&item.ok()?).ok()?);
    }
    Some(Persisted {
        resource_version: listing.meta.resource_version,
        objects,
    })
}

/// Where [`resume`] is.
enum Step {
    /// Handing on the persisted objects as the first list.
    Seed {
        objects: std::vec::IntoIter<SlimObject>,
        resource_version: String,
        begun: bool,
    },
    /// About to watch from `resource_version`.
    Watch {
        resource_version: String,
        pause: bool,
    },
    /// Watching.
    Events {
        events: BoxStream<'static, kube::Result<WatchEvent<SlimObject>>>,
        resource_version: String,
        any: bool,
    },
}

/// What one step of [`resume`] makes.
enum Next {
    /// An event for the watcher, and the step after it.
    Yield(Box<watcher::Event<SlimObject>>, Step),
    /// Nothing yet: the step after.
    Again(Step),
    /// The end: kube's watcher lists afresh.
    Stop,
}

/// The persisted objects as an initial list, then watches from their resourceVersion (each
/// resumed from the last version seen) for as long as the apiserver grants them; ends when
/// it does not, for kube's watcher to list afresh.
pub(super) fn resume(
    api: Api<SlimObject>,
    persisted: Persisted,
    plural: &'static str,
) -> impl Stream<Item = watcher::Result<watcher::Event<SlimObject>>> + Send {
    let first = Step::Seed {
        objects: persisted.objects.into_iter(),
        resource_version: persisted.resource_version,
        begun: false,
    };
    futures_util::stream::unfold(Some(first), move |step| {
        let api = api.clone();
        async move {
            let mut step = step?;
            loop {
                step = match step.advance(&api, plural).await {
                    Next::Yield(event, next) => return Some((Ok(*event), Some(next))),
                    Next::Again(next) => next,
                    Next::Stop => return None,
                };
            }
        }
    })
}

impl Step {
    /// Takes this step.
    async fn advance(self, api: &Api<SlimObject>, plural: &'static str) -> Next {
        match self {
            Step::Seed {
                objects,
                resource_version,
                begun: false,
            } => {
                let next = Step::Seed {
                    objects,
                    resource_version,
                    begun: true,
                };
                Next::Yield(Box::new(watcher::Event::Init), next)
            }
            Step::Seed {
                mut objects,
                resource_version,
                begun: true,
            } => match objects.next() {
                Some(object) => {
                    let next = Step::Seed {
                        objects,
                        resource_version,
                        begun: true,
                    };
                    Next::Yield(Box::new(watcher::Event::InitApply(object)), next)
                }
                None => {
                    tracing::debug!(resource = plural, %resource_version, "resuming from the cache");
                    let next = Step::Watch {
                        resource_version,
                        pause: false,
                    };
                    Next::Yield(Box::new(watcher::Event::InitDone), next)
                }
            },
            Step::Watch {
                resource_version,
                pause,
            } => {
                if pause {
                    tokio::time::sleep(REWATCH_AFTER_EMPTY).await;
                }
                let params = WatchParams::default();
                match api.watch(&params, &resource_version).await {
                    Ok(events) => Next::Again(Step::Events {
                        events: events.boxed(),
                        resource_version,
                        any: false,
                    }),
                    Err(error) => {
                        tracing::info!(resource = plural, %error, "cannot resume the watch; listing");
                        Next::Stop
                    }
                }
            }
            Step::Events {
                events,
                resource_version,
                any,
            } => next_event(events, resource_version, any, plural).await,
        }
    }
}

/// The next event of a resumed watch.
async fn next_event(
    mut events: BoxStream<'static, kube::Result<WatchEvent<SlimObject>>>,
    mut resource_version: String,
    any: bool,
    plural: &'static str,
) -> Next {
    let event = match events.next().await {
        None => {
            return Next::Again(Step::Watch {
                resource_version,
                pause: !any,
            });
        }
        Some(Ok(event)) => event,
        Some(Err(error)) => {
            tracing::info!(resource = plural, %error, "the resumed watch failed; listing");
            return Next::Stop;
        }
    };
    let out = match event {
        WatchEvent::Added(object) | WatchEvent::Modified(object) => {
            version_of(&object, &mut resource_version);
            watcher::Event::Apply(object)
        }
        WatchEvent::Deleted(object) => {
            version_of(&object, &mut resource_version);
            watcher::Event::Delete(object)
        }
        WatchEvent::Bookmark(bookmark) => {
            return Next::Again(Step::Events {
                events,
                resource_version: bookmark.metadata.resource_version,
                any: true,
            });
        }
        WatchEvent::Error(status) => {
            tracing::info!(resource = plural, code = status.code, message = %status.message, "the persisted version cannot be resumed; listing");
            return Next::Stop;
        }
    };
    let next = Step::Events {
        events,
        resource_version,
        any: true,
    };
    Next::Yield(Box::new(out), next)
}

/// Moves `resource_version` to `object`'s, when it has one.
fn version_of(object: &SlimObject, resource_version: &mut String) {
    if let Some(version) = &object.metadata.resource_version {
        resource_version.clone_from(version);
    }
}

#[cfg(test)]
mod tests;
