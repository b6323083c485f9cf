//! Offline watches: the cached set's changes after the client's resourceVersion as events
//! (ADDED, MODIFIED, DELETED, in resourceVersion order; every member as ADDED when it gave
//! none), a BOOKMARK at the set's version when it allows bookmarks, then the node's own
//! changes as the local layer writes them, until the cloud is back or the watch times out;
//! then a clean end, so the client re-lists — from the cloud, if it is back. (YurtHub sends nothing at all.) A version the cache cannot
//! replay from gets an ERROR `410 Expired` event, as kube-apiserver sends, and the client
//! re-lists from the cache.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::Local;
use super::error::LocalError;
use super::list::{CHUNK, CHUNKS_IN_FLIGHT};
use super::protobuf_answer::{PROTOBUF_WATCH, TypeNames, event_frame};
use super::watch_options::{Since, WatchRead};
use crate::cache::{self, Backlog, LocalChange, ReadError, ResourceKey, Selectors, SetMeta};
use crate::error::BoxError;
use crate::reply::ResponseBody;
use crate::reply::{expired_event, failure_status};
use crate::request::{Answered, RequestContext};
use crate::stream::{Event, EventType, Meta, compare_versions};
use crate::upstream::HealthWatch;

/// What the backlog reader reports before it streams (whether there is a backlog), and the
/// chunks it streams.
type Reader = (
    oneshot::Receiver<Result<(), ReadError>>,
    mpsc::Receiver<Result<Bytes, BoxError>>,
);

/// How long a watch answered here while the health checks still take the cloud for
/// healthy (a connection failed before their verdict) waits for them to turn before it ends.
const UNDECIDED: std::time::Duration = std::time::Duration::from_secs(1);

/// Resolves once the watch is to end because the cloud is back. One begun while the health
/// checks still took the cloud for healthy ends after [`UNDECIDED`] unless they turn
/// meanwhile: its client asks the cloud again, at most once a second, never in a busy loop.
async fn cloud_back(health: &mut HealthWatch, offline_seen: &mut bool) {
    if !*offline_seen {
        let healthy = *health.borrow();
        if healthy {
            tokio::select! {
                _ = health.wait_for(|healthy| !*healthy) => {}
                () = tokio::time::sleep(UNDECIDED) => return,
            }
        }
        *offline_seen = true;
    }
    // A health watch whose sender is gone (the gateway stops) ends the watch too.
    let _ = health.wait_for(|healthy| *healthy).await;
}

/// The chunks of a backlog being read, and whether the watch ends after them.
struct Waiting {
    backlog: Option<mpsc::Receiver<Result<Bytes, BoxError>>>,
    ends: bool,
    health: HealthWatch,
    /// Whether the health checks took the cloud for gone since the watch began.
    offline_seen: bool,
    deadline: tokio::time::Instant,
    /// The node's own changes, and which of them this watch sends.
    local: broadcast::Receiver<Arc<LocalChange>>,
    /// Protobuf's names of the resource's objects, when the client takes protobuf.
    names: Option<TypeNames>,
    wanted: Wanted,
}

/// Which of the node's own changes a watch sends: those of its component's copies of its
/// resource, in its namespace, that its selectors select.
struct Wanted {
    resource: ResourceKey,
    namespace: String,
    selectors: Option<Selectors>,
}

impl Wanted {
    fn takes(&self, change: &LocalChange) -> bool {
        change.resource == self.resource
            && (self.namespace.is_empty() || change.namespace == self.namespace)
            && self
                .selectors
                .as_ref()
                .is_some_and(|selectors| selectors.matches(&change.event.object))
    }
}

impl Local {
    /// Answers a watch from the cache.
    pub(super) async fn watch(
        &self,
        context: &RequestContext,
    ) -> Result<http::Response<ResponseBody>, LocalError> {
        let read = WatchRead::of(&context.query)?;
        let names = (context.answered == Answered::Protobuf).then(|| {
            let resource = super::resource_of(context);
            TypeNames::of(self.cache.store().as_ref(), &resource).unwrap_or_default()
        });
        // Before the backlog is read: a change written meanwhile is sent (at worst twice).
        let local = self.cache.local_changes();
        let (found, chunks) = self.backlog_from_store(context, read, names.clone());
        let (backlog, ends) = match found.await {
            Ok(Ok(())) => {
                self.cache.metrics().hits.inc();
                (Some(chunks), false)
            }
            // Nothing cached yet: the watch still waits, like one that has seen no change.
            Ok(Err(ReadError::NotCached)) => {
                self.cache.metrics().misses.inc();
                (None, false)
            }
            Ok(Err(error @ ReadError::Expired { .. })) => {
                let (tx, rx) = mpsc::channel(1);
                let event = match &names {
                    None => expired_event(&error.to_string()),
                    Some(names) => {
                        let status = failure_status(410, "Expired", &error.to_string());
                        let event = Event {
                            kind: EventType::Error,
                            object: Bytes::from(status.to_string()),
                        };
                        Bytes::from(event_frame(&event, names).unwrap_or_default())
                    }
                };
                let _ = tx.try_send(Ok(event));
                (Some(rx), true)
            }
            Ok(Err(error)) => return Err(self.read_failed(&error)),
            Err(_) => (None, false),
        };
        let timeout = context
            .query
            .watch_lasts(self.min_request_timeout, fastrand::f64());
        let waiting = Waiting {
            backlog,
            ends,
            health: self.health.clone(),
            offline_seen: false,
            deadline: tokio::time::Instant::now() + timeout,
            local,
            names: names.clone(),
            wanted: Wanted {
                resource: super::resource_of(context),
                namespace: context.info.namespace.clone(),
                selectors: Selectors::new(&context.query.labels, &context.query.fields).ok(),
            },
        };
        let events = futures_util::stream::unfold(waiting, |mut state| async move {
            if let Some(backlog) = state.backlog.as_mut() {
                match backlog.recv().await {
                    Some(chunk) => return Some((chunk.map(http_body::Frame::data), state)),
                    None => state.backlog = None,
                }
            }
            if state.ends {
                return None;
            }
            loop {
                let change = tokio::select! {
                    () = cloud_back(&mut state.health, &mut state.offline_seen) => return None,
                    () = tokio::time::sleep_until(state.deadline) => return None,
                    change = state.local.recv() => change,
                };
                match change {
                    Ok(change) if state.wanted.takes(&change) => {
                        let mut chunk = BytesMut::new();
                        match &state.names {
                            None => change.event.encode(&mut chunk),
                            Some(names) => match event_frame(&change.event, names) {
                                Ok(frame) => chunk.extend_from_slice(&frame),
                                // Not writable in protobuf: a clean end, and the client
                                // asks again.
                                Err(_) => return None,
                            },
                        }
                        return Some((Ok(http_body::Frame::data(chunk.freeze())), state));
                    }
                    Ok(_) => {}
                    // Fallen behind the node's changes: a clean end, and the client
                    // watches again from its last version, read from the store.
                    Err(_) => return None,
                }
            }
        });
        let mut response = http::Response::new(StreamBody::new(events).boxed_unsync());
        let media = if names.is_some() {
            PROTOBUF_WATCH
        } else {
            "application/json"
        };
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(media),
        );
        Ok(response)
    }

    /// Starts a blocking reader of the backlog `context` wants: it reports whether there is
    /// one, then streams its events in chunks.
    fn backlog_from_store(
        &self,
        context: &RequestContext,
        read: WatchRead,
        names: Option<TypeNames>,
    ) -> Reader {
        let (found_tx, found_rx) = oneshot::channel();
        let (chunks_tx, chunks_rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
        let Since::Version(since) = read.since.clone() else {
            // Nothing before the watch: no backlog, and the channel ends at once.
            let _ = found_tx.send(Ok(()));
            return (found_rx, chunks_rx);
        };
        let store = self.cache.store().clone();
        let resource = super::resource_of(context);
        let scope = super::ReadScope::of(context);
        tokio::task::spawn_blocking(move || {
            match cache::watch_backlog(&store, &resource, scope.scope(), &since) {
                Ok(backlog) => {
                    if found_tx.send(Ok(())).is_ok() {
                        produce(backlog, &read, names.as_ref(), &chunks_tx);
                    }
                }
                Err(error) => {
                    let _ = found_tx.send(Err(error));
                }
            }
        });
        (found_rx, chunks_rx)
    }
}

/// Writes the backlog's events, then a BOOKMARK when asked for (always, to end the initial
/// events), chunk by chunk, stopping if the client went away.
fn produce(
    backlog: Backlog,
    read: &WatchRead,
    names: Option<&TypeNames>,
    tx: &mpsc::Sender<Result<Bytes, BoxError>>,
) {
    let Backlog { meta, events } = backlog;
    let mut chunk = BytesMut::with_capacity(CHUNK + 4096);
    // The newest version sent: a bookmark never takes the client back.
    let mut newest = String::new();
    for event in events {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                let _ = tx.blocking_send(Err(Box::new(error)));
                return;
            }
        };
        if let Ok(meta) = Meta::parse(&event.object)
            && compare_versions(&meta.resource_version, &newest).is_none_or(|o| o.is_gt())
        {
            newest = meta.resource_version.into_owned();
        }
        if !write_event(&event, names, &mut chunk, tx) {
            return;
        }
        if chunk.len() >= CHUNK && tx.blocking_send(Ok(chunk.split().freeze())).is_err() {
            return;
        }
    }
    let behind = compare_versions(&meta.resource_version, &newest).is_some_and(|o| o.is_lt());
    if read.initial_events_end {
        // At the newest version sent, so the client's next watch misses nothing.
        let version = if behind {
            &newest
        } else {
            &meta.resource_version
        };
        let bookmark = bookmark_event(&meta, version, true);
        if !write_event(&bookmark, names, &mut chunk, tx) {
            return;
        }
    } else if read.bookmark && !meta.resource_version.is_empty() && !behind {
        let bookmark = bookmark_event(&meta, &meta.resource_version, false);
        if !write_event(&bookmark, names, &mut chunk, tx) {
            return;
        }
    }
    if !chunk.is_empty() {
        let _ = tx.blocking_send(Ok(chunk.freeze()));
    }
}

/// Writes `event` into `chunk` as the client takes it (JSON, or protobuf by `names`); an
/// event protobuf cannot carry ends the watch with an error, and `false`.
fn write_event(
    event: &Event,
    names: Option<&TypeNames>,
    chunk: &mut BytesMut,
    tx: &mpsc::Sender<Result<Bytes, BoxError>>,
) -> bool {
    let Some(names) = names else {
        event.encode(chunk);
        return true;
    };
    match event_frame(event, names) {
        Ok(frame) => {
            chunk.extend_from_slice(&frame);
            true
        }
        Err(error) => {
            let _ = tx.blocking_send(Err(Box::new(error)));
            false
        }
    }
}

/// A BOOKMARK of the set at `version`: the client resumes from there. `initial_events_end`
/// annotates it as the end of the initial events, as kube-apiserver does.
fn bookmark_event(meta: &SetMeta, version: &str, initial_events_end: bool) -> Event {
    let kind = meta
        .list_kind
        .strip_suffix("List")
        .unwrap_or(&meta.list_kind);
    let mut metadata = serde_json::json!({"resourceVersion": version});
    if initial_events_end {
        metadata["annotations"] = serde_json::json!({"k8s.io/initial-events-end": "true"});
    }
    let object = serde_json::json!({
        "kind": kind,
        "apiVersion": meta.api_version,
        "metadata": metadata,
    });
    Event {
        kind: EventType::Bookmark,
        object: Bytes::from(object.to_string()),
    }
}

/// An ERROR event `410 Expired`: client-go and kube-rs re-list on it.
#[cfg(test)]
mod tests {
    use super::*;

    fn pod(rv: u32) -> Bytes {
        Bytes::from(format!(
            r#"{{"metadata":{{"name":"p{rv}","resourceVersion":"{rv}"}}}}"#
        ))
    }

    /// What the client reads of `events` from a set synced to `synced`, as (type, rv).
    fn sent(events: Vec<Event>, synced: &str, bookmark: bool) -> Vec<(String, String)> {
        let read = WatchRead {
            since: Since::Version(String::new()),
            bookmark,
            initial_events_end: false,
        };
        sent_as(events, synced, &read)
    }

    fn sent_as(events: Vec<Event>, synced: &str, read: &WatchRead) -> Vec<(String, String)> {
        let meta = SetMeta {
            resource_version: synced.into(),
            list_kind: "PodList".into(),
            api_version: "v1".into(),
            ..SetMeta::default()
        };
        let backlog = Backlog {
            meta,
            events: Box::new(events.into_iter().map(Ok)),
        };
        let (tx, mut rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
        produce(backlog, read, None, &tx);
        drop(tx);
        let mut text = Vec::new();
        while let Ok(chunk) = rx.try_recv() {
            text.extend_from_slice(&chunk.unwrap());
        }
        String::from_utf8(text)
            .unwrap()
            .lines()
            .map(|line| {
                let event: serde_json::Value = serde_json::from_str(line).unwrap();
                if event["type"] == "BOOKMARK" {
                    assert_eq!(event["object"]["kind"], "Pod");
                    assert_eq!(event["object"]["apiVersion"], "v1");
                    let end =
                        &event["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"];
                    assert_eq!(end.as_str() == Some("true"), read.initial_events_end);
                }
                (
                    event["type"].as_str().unwrap().to_owned(),
                    event["object"]["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                )
            })
            .collect()
    }

    fn pair(kind: &str, rv: &str) -> (String, String) {
        (kind.to_owned(), rv.to_owned())
    }

    #[test]
    fn a_backlog_ends_with_a_bookmark_at_the_sets_version_when_the_client_asks() {
        let events = || {
            vec![
                Event {
                    kind: EventType::Modified,
                    object: pod(11),
                },
                Event {
                    kind: EventType::Deleted,
                    object: pod(12),
                },
            ]
        };
        assert_eq!(
            sent(events(), "14", true),
            [
                pair("MODIFIED", "11"),
                pair("DELETED", "12"),
                pair("BOOKMARK", "14")
            ]
        );
        assert_eq!(
            sent(events(), "14", false),
            [pair("MODIFIED", "11"), pair("DELETED", "12")]
        );
        assert_eq!(sent(Vec::new(), "14", true), [pair("BOOKMARK", "14")]);
        // A set synced to less than an object stored since (by a GET) would take the
        // client back: no bookmark.
        assert_eq!(
            sent(events(), "11", true),
            [pair("MODIFIED", "11"), pair("DELETED", "12")]
        );
    }

    #[test]
    fn initial_events_always_end_with_the_annotated_bookmark_at_the_newest_version() {
        let read = WatchRead {
            since: Since::Version(String::new()),
            bookmark: true,
            initial_events_end: true,
        };
        let added = |rv| Event {
            kind: EventType::Added,
            object: pod(rv),
        };
        assert_eq!(
            sent_as(vec![added(11), added(12)], "14", &read),
            [
                pair("ADDED", "11"),
                pair("ADDED", "12"),
                pair("BOOKMARK", "14")
            ]
        );
        // A node's own write newer than the set's version: the bookmark is at it.
        assert_eq!(
            sent_as(vec![added(15)], "14", &read),
            [pair("ADDED", "15"), pair("BOOKMARK", "15")]
        );
        assert_eq!(sent_as(Vec::new(), "14", &read), [pair("BOOKMARK", "14")]);
    }
}
