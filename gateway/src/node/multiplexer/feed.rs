//! The one upstream list and watch of a pool-scope resource that feeds its shared state.
//!
//! The feed is a client of the gateway's own proxy (`edgegate/VERSION multiplexer`, which
//! the multiplexer never answers itself): its list and watch are balanced and
//! health-checked, cached for component `edgegate` — the copy offline answers and a
//! restart read — and answered from that cache while the cloud is away. It watches with
//! bookmarks from the state's version, for a random 5–10 minutes at a time, and lists again
//! only when that version has expired (`410`). After a restart it starts from what the
//! cache persisted and watches on from there.

use std::time::Duration;

use http::{Request, StatusCode};
use kube::runtime::utils::Backoff;
use serde::Deserialize;

mod error;
mod item;
mod page;

pub use error::FeedError;
use error::may_mend;
use item::owned;
pub(super) use item::typed;
use page::{PageSize, next_data};

use super::metrics::{MultiplexerMetrics, ResourceLabels};
use super::object::Object;
use super::resource::Resource;
use super::state::{ListType, Shared};
use crate::cache::Store;
use crate::node::informer::{ListBackoff, own_listing};
use crate::stream::{Event, EventType, Meta, WatchFramer};
use crate::upstream::HealthWatch;

/// How often a resource the cluster does not serve is asked for again (an upgrade of the
/// cluster may bring it).
const ABSENT_RETRY: Duration = Duration::from_secs(300);

/// How long the first list waits for its source to be known (see [`Feed::sources`]).
const SOURCE_WAIT: Duration = Duration::from_secs(10);

/// How long the first list waits for the cloud to be taken for up.
const CLOUD_WAIT: Duration = Duration::from_secs(30);

/// Tries of one page, the first included, before the list fails and starts over.
const PAGE_TRIES: u32 = 6;

/// How a watch ended without failing.
enum Ended {
    /// At its timeout or by the gateway: watch again from the state's version.
    Cleanly,
    /// Its version has expired: list again.
    Expired,
}

/// The feed of one resource.
pub(super) struct Feed {
    pub(super) client: kube::Client,
    pub(super) resource: Resource,
    pub(super) shared: std::sync::Arc<Shared>,
    pub(super) metrics: MultiplexerMetrics,
    /// Changes when the feeds' source changes (the pool's leaders, or a leader back): the
    /// watch then ends and resumes from the state's version, from the new source. Above 0
    /// once the source is known.
    pub(super) sources: tokio::sync::watch::Receiver<u64>,
    /// Whether some apiserver is healthy.
    pub(super) cloud: HealthWatch,
}

impl Feed {
    /// Runs the feed for as long as the gateway does.
    pub(super) async fn run(mut self, store: Option<std::sync::Arc<dyn Store>>) {
        let resource = self.resource.clone();
        if let Some(store) = store {
            let persisted =
                tokio::task::spawn_blocking(move || persisted(store.as_ref(), &resource)).await;
            if let Ok(Some((list, objects, version))) = persisted {
                tracing::info!(resource = %self.resource, objects = objects.len(), version, "shared state resumed from the cache");
                self.shared.replace(list, objects, version);
                self.held();
            }
        }
        // A follower's first list goes to its pool's leader, not the cloud: it waits until
        // the source is known (the pool's leaders read), or a while without. The node's
        // clients wait for that list meanwhile.
        if self.shared.version().is_none() {
            self.shared.note_underway(true);
        }
        let mut first = self.sources.clone();
        let known = first.wait_for(|changes| *changes > 0);
        // Nor before the cloud is taken for up, for a while: the gateway answers the list from
        // its cache meanwhile, which holds nothing of it before a first list. Over a thin link
        // the first probe can time out, and the gateway then starts offline.
        let mut cloud = self.cloud.clone();
        let up = cloud.wait_for(|up| *up);
        let cloud_wait = match self.shared.version() {
            None => CLOUD_WAIT,
            Some(_) => Duration::ZERO,
        };
        tokio::join!(
            async { tokio::time::timeout(SOURCE_WAIT, known).await.is_ok() },
            async { tokio::time::timeout(cloud_wait, up).await.is_ok() },
        );
        let mut backoff = ListBackoff::default();
        let mut listed = self.shared.version().is_some();
        let mut told_absent = false;
        loop {
            if !listed {
                let cloud_was_up = *self.cloud.borrow();
                match self.list().await {
                    Ok(()) => listed = true,
                    // A cluster that does not serve this version (EndpointSlices are
                    // `v1beta1` before 1.21): its clients go to the apiserver as before.
                    // Not while the cloud is away: the gateway answers `404` itself then,
                    // for a list its cache has nothing of.
                    Err(FeedError::Status(StatusCode::NOT_FOUND))
                        if cloud_was_up && *self.cloud.borrow() =>
                    {
                        if !told_absent {
                            tracing::info!(resource = %self.resource, "not served by this cluster: its lists and watches go to the apiserver");
                            told_absent = true;
                        }
                        tokio::time::sleep(ABSENT_RETRY).await;
                        continue;
                    }
                    Err(error) => {
                        tracing::warn!(resource = %self.resource, %error, "multiplexer list failed; retrying");
                        // The clients waiting for a first list go on waiting through a
                        // pause after a failure that may mend, until it stalls.
                        let mends = self.shared.version().is_none() && may_mend(&error);
                        self.shared.note_underway(mends);
                        tokio::time::sleep(backoff.next().unwrap_or(Duration::from_secs(30))).await;
                        continue;
                    }
                }
            }
            let since = self.shared.version().unwrap_or_default();
            self.sources.mark_unchanged();
            let mut sources = self.sources.clone();
            let watched = tokio::select! {
                watched = self.watch(since) => watched,
                Ok(()) = sources.changed() => {
                    tracing::info!(resource = %self.resource, "the feed's source changed: watching again from it");
                    Ok(Ended::Cleanly)
                }
            };
            match watched {
                Ok(Ended::Cleanly) => {
                    // A watch the gateway ended at once (it had nothing to serve it from)
                    // must not turn into a busy loop.
                    if self.shared.version() == Some(since) {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    backoff.reset();
                }
                Ok(Ended::Expired) => {
                    tracing::info!(resource = %self.resource, since, "multiplexer watch expired: listing again");
                    listed = false;
                }
                Err(error) => {
                    tracing::warn!(resource = %self.resource, %error, "multiplexer watch failed; retrying");
                    tokio::time::sleep(backoff.next().unwrap_or(Duration::from_secs(30))).await;
                }
            }
        }
    }

    fn held(&self) {
        self.metrics
            .held(&self.resource.to_string(), self.shared.size());
    }

    async fn send(&self, query: &str) -> Result<http::Response<kube::client::Body>, FeedError> {
        let uri = format!("{}?{query}", self.resource.path());
        let request = Request::get(uri)
            .header(http::header::ACCEPT, "application/json")
            .body(kube::client::Body::empty())
            .map_err(kube::Error::HttpError)?;
        Ok(self.client.send(request).await?)
    }

    /// Lists the resource, page by page, and replaces the state with it.
    ///
    /// A page that fails in a way another try may mend (the link broke it off or stalled
    /// it, the apiserver could not send it in time, the gateway's upstream was briefly
    /// away) is asked for again from the same `continue` token, smaller, up to
    /// [`PAGE_TRIES`] times: the pages before it are kept, and the clients waiting for the
    /// first list go on waiting. Pages are sized to the link ([`PageSize`]). On a thin link
    /// a list of 1 000 EndpointSlices is minutes of data; starting it over would never end.
    async fn list(&self) -> Result<(), FeedError> {
        let _underway = Underway::new(&self.shared);
        let mut objects = Vec::new();
        let mut continued: Option<String> = None;
        let mut size = PageSize::default();
        let mut tries = 0;
        let mut backoff = ListBackoff::default();
        let (version, list) = loop {
            let kept = objects.len();
            let asked = tokio::time::Instant::now();
            let limit = size.limit();
            let page = match self.page(limit, continued.as_deref(), &mut objects).await {
                Ok(page) => page,
                Err(error) if may_mend(&error) && tries + 1 < PAGE_TRIES => {
                    tries += 1;
                    objects.truncate(kept);
                    size.failed();
                    let limit = size.limit();
                    tracing::warn!(resource = %self.resource, %error, limit, tries, "a page of the multiplexer's list failed; asking for it again");
                    // The clients go on waiting through the pause, as for a page asked for.
                    self.shared.note_awaiting(true);
                    let pause = backoff.next().unwrap_or(Duration::from_secs(30));
                    tokio::time::sleep(pause).await;
                    continue;
                }
                Err(error) => return Err(error),
            };
            tries = 0;
            let took = asked.elapsed();
            size.came(objects.len() - kept, page.bytes, took);
            tracing::debug!(resource = %self.resource, limit, took = took.as_secs_f64(), bytes = page.bytes, next = size.limit(), "a page of the multiplexer's list came");
            let head = page.head;
            match head.metadata.continue_token.filter(|t| !t.is_empty()) {
                Some(token) => continued = Some(token),
                None => {
                    let list = ListType {
                        kind: head.kind,
                        api_version: head.api_version,
                    };
                    break (head.metadata.resource_version, list);
                }
            }
        };
        let version = version
            .parse()
            .map_err(|_| FeedError::Body(format!("list resourceVersion {version:?}")))?;
        tracing::debug!(resource = %self.resource, objects = objects.len(), version, "multiplexer listed");
        self.shared.replace(list, objects, version);
        self.held();
        self.metrics
            .lists
            .get_or_create(&ResourceLabels {
                resource: self.resource.to_string(),
            })
            .inc();
        Ok(())
    }

    /// Asks for one page of `limit` items from `continued` (the first page without) and
    /// reads its items into `objects`.
    async fn page(
        &self,
        limit: u32,
        continued: Option<&str>,
        objects: &mut Vec<Object>,
    ) -> Result<page::Page, FeedError> {
        let query = {
            let mut query = form_urlencoded::Serializer::new(String::new());
            query.append_pair("limit", &limit.to_string());
            if let Some(token) = continued {
                query.append_pair("continue", token);
            }
            query.finish()
        };
        self.shared.note_awaiting(true);
        let response = self.send(&query).await;
        self.shared.note_awaiting(false);
        let response = response?;
        if !response.status().is_success() {
            return Err(FeedError::Status(response.status()));
        }
        page::read(response.into_body(), &self.shared, objects).await
    }

    /// Watches from `since` and applies each event, until the watch ends.
    async fn watch(&self, since: u64) -> Result<Ended, FeedError> {
        let timeout = 300 + fastrand::u64(0..300);
        let query = format!(
            "watch=true&allowWatchBookmarks=true&resourceVersion={since}&timeoutSeconds={timeout}"
        );
        let response = self.send(&query).await?;
        match response.status() {
            StatusCode::GONE => return Ok(Ended::Expired),
            status if !status.is_success() => return Err(FeedError::Status(status)),
            _ => {}
        }
        let mut body = response.into_body();
        let mut framer = WatchFramer::new();
        while let Some(data) = next_data(&mut body).await? {
            framer.push(&data);
            while let Some(frame) = framer.next_frame()? {
                let event = Event::parse(&frame)?;
                match event.kind {
                    EventType::Added | EventType::Modified | EventType::Deleted => {
                        let object = Object::parse(owned(&event.object))?;
                        self.shared.apply(event.kind, object);
                        self.held();
                    }
                    EventType::Bookmark => {
                        let meta = Meta::parse(&event.object)?;
                        if let Ok(version) = meta.resource_version.parse() {
                            self.shared.advance(version);
                        }
                    }
                    EventType::Error => {
                        let status: WatchStatus = serde_json::from_slice(&event.object)
                            .map_err(|e| FeedError::Body(e.to_string()))?;
                        if status.code == 410 {
                            return Ok(Ended::Expired);
                        }
                        return Err(FeedError::Status(
                            StatusCode::from_u16(status.code)
                                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                        ));
                    }
                }
            }
        }
        framer.finish()?;
        Ok(Ended::Cleanly)
    }
}

/// The feed's list under way, for the clients waiting on it: set while it lives.
struct Underway<'a>(&'a Shared);

impl<'a> Underway<'a> {
    fn new(shared: &'a Shared) -> Underway<'a> {
        shared.note_underway(true);
        Underway(shared)
    }
}

impl Drop for Underway<'_> {
    fn drop(&mut self) {
        self.0.note_underway(false);
    }
}

/// The code of a watch's ERROR event.
#[derive(Deserialize)]
struct WatchStatus {
    #[serde(default)]
    code: u16,
}

/// What the cache persisted of the feed's list and watch: the state to start from.
fn persisted(store: &dyn Store, resource: &Resource) -> Option<(ListType, Vec<Object>, u64)> {
    let listing = own_listing(store, &resource.group, &resource.version, &resource.plural)?;
    let version = listing.meta.resource_version.parse().ok()?;
    let list = ListType {
        kind: listing.meta.list_kind.clone(),
        api_version: listing.meta.api_version.clone(),
    };
    let mut objects = Vec::new();
    for item in listing.items {
        // A set that does not read back whole is not a state to start from.
        objects.push(Object::parse(typed(item.ok()?, &list)).ok()?);
    }
    Some((list, objects, version))
}

#[cfg(test)]
mod tests;
