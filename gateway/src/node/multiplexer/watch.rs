//! A watch answered from a shared state: where it starts (every selected object as ADDED,
//! or the window's changes after the client's version), then each new change as the
//! client's namespace and selectors see it — ADDED when an object comes into sight,
//! MODIFIED while it stays, DELETED when it leaves, at the change's version, as
//! kube-apiserver's watch cache does — with a BOOKMARK every minute when the client allows
//! them, until its timeout. A client that falls too far behind is ended cleanly and resumes
//! from the window. A filtered watch is sent again the objects a lookup change touched
//! ([`super::refilter`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use http_body_util::{BodyExt, StreamBody};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::body::SharedBody;
use super::object::Object;
use super::refilter::{Pending, Refilter};
use super::state::{Change, Shared, Start};
use crate::cache::Selectors;
use crate::filter::Touched;
use crate::stream::{Event, EventType};

/// How often a client that allows bookmarks gets one (when the state moved on).
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// Initial events are sent in chunks of about this many bytes.
const CHUNK: usize = 64 * 1024;

/// Which objects a client sees: its namespace (all, if empty) and its selectors.
pub(super) struct Sight {
    pub(super) namespace: String,
    pub(super) selectors: Selectors,
}

impl Sight {
    fn sees(&self, object: &Object) -> bool {
        (self.namespace.is_empty() || object.namespace == self.namespace)
            && self.selectors.matches(&object.bytes)
    }

    /// The event a client with this sight gets for `change`, if any.
    pub(super) fn event(&self, change: &Change) -> Option<Event> {
        let saw = match &change.previous {
            Some(previous) => self.sees(previous),
            // A deletion of an object the state never held: the client saw it if it sees it.
            None => change.kind == EventType::Deleted && self.sees(&change.object),
        };
        let sees = change.kind != EventType::Deleted && self.sees(&change.object);
        let (kind, object) = match (saw, sees) {
            (false, true) => (EventType::Added, change.object.bytes.clone()),
            (true, true) => (EventType::Modified, change.object.bytes.clone()),
            (true, false) if change.kind == EventType::Deleted => {
                (EventType::Deleted, change.object.bytes.clone())
            }
            // Out of sight by this change: the object as the client last saw it, at the
            // change's version.
            (true, false) => (
                EventType::Deleted,
                change.previous.as_ref()?.at(change.version),
            ),
            (false, false) => return None,
        };
        Some(Event { kind, object })
    }
}

/// What a watch's body is made from.
pub(super) struct Watching {
    pub(super) shared: Arc<Shared>,
    pub(super) start: Start,
    pub(super) changes: broadcast::Receiver<Arc<Change>>,
    pub(super) versions: watch::Receiver<Option<u64>>,
    pub(super) sight: Sight,
    /// The client's version: changes up to it are not sent.
    pub(super) since: u64,
    /// `kind` and `apiVersion` of a BOOKMARK's object, when the client allows them.
    pub(super) bookmarks: Option<(String, String)>,
    pub(super) lasts: Duration,
    /// For a filtered watch: what it re-filters by.
    pub(super) refilter: Option<Refilter>,
    /// Counts the objects it sends again.
    pub(super) resent: Counter,
}

/// The response to a watch.
pub(super) fn respond(watching: Watching) -> http::Response<SharedBody> {
    let body = StreamBody::new(events(watching));
    json(body.boxed_unsync())
}

/// The response to a watch from a version older than the window: one `410 Expired` event.
pub(super) fn expired(message: &str) -> http::Response<SharedBody> {
    let event = crate::reply::expired_event(message);
    let body = StreamBody::new(futures_util::stream::iter([Ok::<_, Infallible>(
        http_body::Frame::data(event),
    )]));
    json(body.boxed_unsync())
}

fn json(body: SharedBody) -> http::Response<SharedBody> {
    let mut response = http::Response::new(body);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// Waits until the state is retired (or dropped).
async fn retired(retired: &mut watch::Receiver<bool>) {
    // An error is the state dropped: nothing feeds it either.
    let _ = retired.wait_for(|retired| *retired).await;
}

/// Where a watch's body is.
struct Flow {
    shared: Arc<Shared>,
    backlog: Backlog,
    changes: broadcast::Receiver<Arc<Change>>,
    versions: watch::Receiver<Option<u64>>,
    /// Whether the state was retired (the watch then ends).
    retired: watch::Receiver<bool>,
    sight: Sight,
    since: u64,
    /// The newest version the client has been sent.
    sent: u64,
    bookmarks: Option<(String, String)>,
    deadline: Instant,
    next_bookmark: Instant,
    done: bool,
    refilter: Option<Refilter>,
    /// Objects to send again, their filters' lookups having changed.
    pending: Pending,
    resent: Counter,
}

enum Backlog {
    Objects(std::vec::IntoIter<Arc<Object>>),
    Changes(std::vec::IntoIter<Arc<Change>>),
}

fn events(
    watching: Watching,
) -> impl Stream<Item = Result<http_body::Frame<Bytes>, Infallible>> + Send + use<> {
    let now = Instant::now();
    let resumed = matches!(watching.start, Start::Changes(_));
    let (backlog, sent) = match watching.start {
        Start::State { objects, version } => (Backlog::Objects(objects.into_iter()), version),
        Start::Changes(changes) => (Backlog::Changes(changes.into_iter()), watching.since),
    };
    let mut flow = Flow {
        retired: watching.shared.retired(),
        shared: watching.shared,
        backlog,
        changes: watching.changes,
        versions: watching.versions,
        sight: watching.sight,
        since: watching.since,
        sent,
        bookmarks: watching.bookmarks,
        deadline: now + watching.lasts,
        next_bookmark: now + BOOKMARK_EVERY,
        done: false,
        refilter: watching.refilter,
        pending: Pending::default(),
        resent: watching.resent,
    };
    if resumed {
        // The client's objects were filtered as the lookups were at its version.
        let missed = flow.shared.lookups_since(flow.since);
        match missed {
            None => flow.touched(None),
            Some(changes) => changes.iter().for_each(|c| flow.touched(c.as_ref())),
        }
    }
    futures_util::stream::unfold(flow, |mut flow| async move {
        if flow.done {
            return None;
        }
        if let Some(chunk) = flow.backlog_chunk() {
            return Some((Ok::<_, Infallible>(http_body::Frame::data(chunk)), flow));
        }
        let chunk = flow.next_live().await?;
        Some((Ok::<_, Infallible>(http_body::Frame::data(chunk)), flow))
    })
}

impl Flow {
    /// The next chunk of the backlog, if any is left.
    fn backlog_chunk(&mut self) -> Option<Bytes> {
        let mut chunk = BytesMut::new();
        while chunk.len() < CHUNK {
            let event = match &mut self.backlog {
                Backlog::Objects(objects) => {
                    let Some(object) = objects.next() else { break };
                    if !self.sight.sees(&object) {
                        continue;
                    }
                    Event {
                        kind: EventType::Added,
                        object: object.bytes.clone(),
                    }
                }
                Backlog::Changes(changes) => {
                    let Some(change) = changes.next() else { break };
                    self.sent = self.sent.max(change.version);
                    match self.sight.event(&change) {
                        Some(event) => event,
                        None => continue,
                    }
                }
            };
            event.encode(&mut chunk);
        }
        (!chunk.is_empty()).then(|| chunk.freeze())
    }

    /// The next live event (or bookmark), waiting for it; `None` when the watch ends.
    async fn next_live(&mut self) -> Option<Bytes> {
        loop {
            if let Some(chunk) = self.resend_chunk() {
                return Some(chunk);
            }
            let bookmark_due = self.bookmarks.is_some();
            let refiltering = self.refilter.is_some();
            tokio::select! {
                change = lookup_change(&mut self.refilter), if refiltering => match change {
                    Ok(change) => self.touched(Some(&change)),
                    Err(broadcast::error::RecvError::Lagged(_)) => self.touched(None),
                    Err(broadcast::error::RecvError::Closed) => self.refilter = None,
                },
                change = self.changes.recv() => match change {
                    Ok(change) => {
                        if !change.follows(self.since) {
                            continue;
                        }
                        self.sent = self.sent.max(change.version);
                        if let Some(event) = self.sight.event(&change) {
                            let mut chunk = BytesMut::new();
                            event.encode(&mut chunk);
                            return Some(chunk.freeze());
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::debug!(missed, "a watch fell behind the shared state: ending it");
                        self.done = true;
                        return None;
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                () = tokio::time::sleep_until(self.deadline) => {
                    self.done = true;
                    return self.bookmark();
                }
                // Retired, or the state dropped: nothing feeds it any more.
                () = retired(&mut self.retired) => {
                    tracing::debug!("the resource is no longer pool-scope: ending a watch of it");
                    self.done = true;
                    return None;
                }
                () = tokio::time::sleep_until(self.next_bookmark), if bookmark_due => {
                    self.next_bookmark += BOOKMARK_EVERY;
                    if let Some(bookmark) = self.bookmark() {
                        return Some(bookmark);
                    }
                }
            }
        }
    }

    /// Queues the objects in sight that a lookup change (`None`: missed changes) touched.
    fn touched(&mut self, change: Option<&crate::filter::LookupChange>) {
        let Some(refilter) = &self.refilter else {
            return;
        };
        let touched = refilter.reads.touched(change);
        match &touched {
            Touched::Nothing => {}
            Touched::Objects(objects) => {
                let objects = objects.len();
                tracing::debug!(?change, objects, "a lookup change: sending objects again");
            }
            Touched::All => tracing::debug!(?change, "a lookup change: sending all again"),
        }
        let (shared, namespace) = (&self.shared, &self.sight.namespace);
        let epoch = change.map_or(0, |change| change.epoch);
        self.pending.queue(touched, epoch, || {
            let (objects, _) = shared.snapshot(namespace);
            objects.iter().map(|o| Arc::from(o.key.as_str())).collect()
        });
    }

    /// The objects waiting to be sent again, as MODIFIED at the version the client was last
    /// sent (the filters make of each what the client is to see). An object the state holds
    /// at a newer version is not: its change, still to come, passes the filters anew.
    fn resend_chunk(&mut self) -> Option<Bytes> {
        let mut chunk = BytesMut::new();
        let version = self.sent.max(self.since);
        while chunk.len() < CHUNK {
            let Some((key, epoch)) = self.pending.next() else {
                break;
            };
            let Some(object) = self.shared.get(&key) else {
                continue;
            };
            if object.version > version || !self.sight.sees(&object) {
                continue;
            }
            if let Some(refilter) = &self.refilter {
                refilter.resends.mark(&key, epoch);
            }
            self.resent.inc();
            Event {
                kind: EventType::Modified,
                object: object.at(version),
            }
            .encode(&mut chunk);
        }
        (!chunk.is_empty()).then(|| chunk.freeze())
    }

    /// A BOOKMARK at the state's version, if the client allows them and it is newer than
    /// what the client was sent.
    fn bookmark(&mut self) -> Option<Bytes> {
        let (kind, api_version) = self.bookmarks.as_ref()?;
        let version = (*self.versions.borrow()).unwrap_or_default();
        if version <= self.sent.max(self.since) {
            return None;
        }
        self.sent = version;
        let object = serde_json::json!({
            "kind": kind,
            "apiVersion": api_version,
            "metadata": {"resourceVersion": version.to_string()},
        });
        let mut chunk = BytesMut::new();
        Event {
            kind: EventType::Bookmark,
            object: Bytes::from(object.to_string()),
        }
        .encode(&mut chunk);
        Some(chunk.freeze())
    }
}

/// The next lookup change a filtered watch follows (never, for one that follows none).
async fn lookup_change(
    refilter: &mut Option<Refilter>,
) -> Result<crate::filter::LookupChange, broadcast::error::RecvError> {
    match refilter {
        Some(refilter) => refilter.changes.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[path = "watch/tests.rs"]
mod tests;
