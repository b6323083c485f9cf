//! One page of the feed's list: asking for it, reading it, how large the next one is, and
//! whether another try may mend a page that failed.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use serde::Deserialize;

use super::error::FeedError;
use super::item::typed;
use crate::node::multiplexer::object::Object;
use crate::node::multiplexer::state::{ListType, Shared};
use crate::stream::{ListFrame, ListFramer};

/// Items per page of the feed's list, at most.
pub(super) const PAGE: u32 = 500;

/// The fewest items a page is asked for as.
const SMALLEST_PAGE: u32 = 50;

/// The bytes a page keeps at least, once its items' size is known: kube-apiserver gzips a
/// response above 128 KiB only, and a page below that would cross the link whole.
const GZIPPED_PAGE: u64 = 160 * 1024;

/// How long a page should take. kube-apiserver ends a list at 60 s; on a thin link a page
/// of 500 large objects is about that, and one cut off is all its bytes spent again.
const PAGE_TIME: Duration = Duration::from_secs(15);

/// How long a page's body may bring no data before it is taken for stalled and asked for
/// again: a connection in ever longer retransmission timeouts. Shorter than the 30 s after
/// which the clients waiting for the first list stop waiting.
const PAGE_STALL: Duration = Duration::from_secs(20);

/// The size of the feed's next page: halved after a page failed, fitted to [`PAGE_TIME`]
/// after one took longer, doubled back after one took less than half of it; never below a
/// page kube-apiserver gzips.
pub(super) struct PageSize {
    limit: u32,
    /// Bytes and items read, for the items' mean size.
    read: (u64, u64),
}

impl Default for PageSize {
    fn default() -> PageSize {
        PageSize {
            limit: PAGE,
            read: (0, 0),
        }
    }
}

impl PageSize {
    /// Items to ask the next page for.
    pub(super) fn limit(&self) -> u32 {
        self.limit
    }

    /// The fewest items a page is asked for as: [`SMALLEST_PAGE`], or more when fewer
    /// would not be gzipped and a whole page would.
    fn floor(&self) -> u32 {
        let (bytes, items) = self.read;
        let Some(mean) = bytes.checked_div(items).filter(|mean| *mean > 0) else {
            return SMALLEST_PAGE;
        };
        match u32::try_from(GZIPPED_PAGE.div_ceil(mean)) {
            Ok(gzipped) if gzipped <= PAGE => gzipped.max(SMALLEST_PAGE),
            _ => SMALLEST_PAGE,
        }
    }

    /// A page of `items` in `bytes` came whole in `took`.
    pub(super) fn came(&mut self, items: usize, bytes: u64, took: Duration) {
        self.read.0 += bytes;
        self.read.1 += items as u64;
        let limit = if took > PAGE_TIME {
            let fitted = f64::from(self.limit) * PAGE_TIME.as_secs_f64() / took.as_secs_f64();
            fitted as u32
        } else if took < PAGE_TIME / 2 {
            self.limit.saturating_mul(2)
        } else {
            self.limit
        };
        self.limit = limit.clamp(self.floor(), PAGE);
    }

    /// A page failed: the next try asks for half as many items.
    pub(super) fn failed(&mut self) {
        self.limit = (self.limit / 2).clamp(self.floor(), PAGE);
    }
}

/// What one page brought.
pub(super) struct Page {
    /// The list's head and tail.
    pub(super) head: ListHead,
    /// The body's bytes.
    pub(super) bytes: u64,
}

/// Reads one page's items into `objects`, noting its data in `shared`.
pub(super) async fn read(
    mut body: kube::client::Body,
    shared: &Shared,
    objects: &mut Vec<Object>,
) -> Result<Page, FeedError> {
    let mut framer = ListFramer::new();
    let mut ends = BytesMut::new();
    let mut list = ListType::default();
    let mut bytes = 0;
    let mut take = |frame: ListFrame| -> Result<(), FeedError> {
        match frame {
            ListFrame::Head(piece) => {
                // What the items lack (kube-apiserver does not repeat it in each).
                let mut whole = piece.to_vec();
                whole.extend_from_slice(b"]}");
                if let Ok(head) = serde_json::from_slice::<ListHead>(&whole) {
                    list = ListType {
                        kind: head.kind,
                        api_version: head.api_version,
                    };
                }
                ends.extend_from_slice(&piece);
            }
            ListFrame::Tail(piece) => ends.extend_from_slice(&piece),
            ListFrame::Item(item) => objects.push(Object::parse(typed(item, &list))?),
        }
        Ok(())
    };
    loop {
        let data = tokio::time::timeout(PAGE_STALL, next_data(&mut body))
            .await
            .map_err(|_| FeedError::Body(format!("no data for {}s", PAGE_STALL.as_secs())))?;
        let Some(data) = data? else { break };
        shared.note_listing();
        bytes += data.len() as u64;
        framer.push(&data);
        while let Some(frame) = framer.next_frame()? {
            take(frame)?;
        }
    }
    while let Some(frame) = framer.finish()? {
        take(frame)?;
    }
    // The head ends with the `[` of items and the tail begins with its `]`.
    let head = serde_json::from_slice(&ends).map_err(|e| FeedError::Body(e.to_string()))?;
    Ok(Page { head, bytes })
}

/// The next data of `body`, skipping other frames; `None` at its end.
pub(super) async fn next_data(body: &mut kube::client::Body) -> Result<Option<Bytes>, FeedError> {
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            return Ok(Some(data));
        }
    }
    Ok(None)
}

/// A list's head and tail read together.
#[derive(Deserialize)]
pub(super) struct ListHead {
    #[serde(default)]
    pub(super) kind: String,
    #[serde(default, rename = "apiVersion")]
    pub(super) api_version: String,
    #[serde(default)]
    pub(super) metadata: ListMeta,
}

/// A list's `metadata`.
#[derive(Default, Deserialize)]
pub(super) struct ListMeta {
    #[serde(default, rename = "resourceVersion")]
    pub(super) resource_version: String,
    #[serde(default, rename = "continue")]
    pub(super) continue_token: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_fit_the_link_and_stay_large_enough_to_be_gzipped() {
        let mut size = PageSize::default();
        assert_eq!(size.limit(), PAGE);
        // 500 EndpointSlices of 4 KiB in 60 s: a quarter as many next.
        size.came(500, 500 * 4096, Duration::from_secs(60));
        assert_eq!(size.limit(), 125);
        size.failed();
        assert_eq!(size.limit(), 62);
        // 4 KiB items: 40 make a page kube-apiserver gzips, fewer than the floor of 50.
        size.failed();
        assert_eq!(size.limit(), SMALLEST_PAGE);
        // Quick pages grow back.
        size.came(50, 50 * 4096, Duration::from_secs(1));
        assert_eq!(size.limit(), 100);
        size.came(100, 100 * 4096, Duration::from_secs(10));
        assert_eq!(
            size.limit(),
            100,
            "between half and whole of the page time: kept"
        );

        // 500 Services of 512 bytes: a page of fewer than 320 would cross the link whole.
        let mut size = PageSize::default();
        size.came(500, 500 * 512, Duration::from_secs(120));
        assert_eq!(size.limit(), 320);
        size.failed();
        assert_eq!(size.limit(), 320);

        // Items so small that no page is gzipped: nothing is lost in smaller pages.
        let mut size = PageSize::default();
        size.came(500, 500 * 128, Duration::from_secs(1));
        size.failed();
        size.failed();
        assert_eq!(size.limit(), 125);
    }
}
